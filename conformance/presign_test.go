package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/internal/testreq"
)

// presignReq asks for a presigned GET of one key, valid for Expires seconds.
type presignReq struct {
	Key     string
	Expires int
}

// presigner makes presigned GET URLs, one per request, in order.
type presigner struct {
	name string
	// sigV2 is true when the URLs must carry SigV2 query auth, false when
	// they must be SigV4; nil when the tool's default may be either (logged).
	sigV2 *bool
	sign  func(t *testing.T, bucket string, reqs []presignReq) []string
}

// boto3Presign is run by python3: it prints one presigned GET URL per
// request of REQS (a JSON list of [key, expires]); one process for all of
// them, as starting python with boto3 costs seconds.
const boto3Presign = `
import json, os, boto3
from botocore.config import Config
e = os.environ
cfg = Config(signature_version=e["SIGVER"]) if e["SIGVER"] else Config()
c = boto3.client("s3", endpoint_url=e["ENDPOINT"], region_name=e["REGION"],
                 aws_access_key_id=e["AK"], aws_secret_access_key=e["SK"], config=cfg)
for key, expires in json.loads(e["REQS"]):
    print(c.generate_presigned_url("get_object", Params={"Bucket": e["BUCKET"], "Key": key}, ExpiresIn=expires))
`

// TestPresign downloads with curl the presigned URLs that the aws cli and
// boto3 make with their default configuration (SigV2 query auth against a
// custom endpoint: AWSAccessKeyId, Expires, Signature) and with s3v4, for a
// plain and an awkward key; expired and tampered URLs get 403. Signatures do
// not depend on the engine: the embedded default over both transports.
func TestPresign(t *testing.T) {
	needBinary(t, "curl", "curl")
	forEachCell(t, []string{testgw.Embedded}, func(t *testing.T, c combo, gw *testgw.Gateway) {
		sdk := sdkClient(t, gw)
		bucket := mustBucket(t, sdk, "presign")
		const plain, awkward = "presign/plain.bin", "presign/a b+c=&ü% (1).bin"
		objects := map[string][]byte{
			plain:   genBytes(900, 700*kib+3), // above the inline knee
			awkward: genBytes(901, 1000),
		}
		for k, b := range objects {
			if _, err := sdk.PutObject(testCtx(t, time.Minute), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: bytes.NewReader(b)}); err != nil {
				t.Fatalf("PutObject %s: %v", k, err)
			}
		}

		var signers []presigner
		if _, err := exec.LookPath("aws"); err == nil {
			cliDefault := newAWSCLIConfig(t, gw, "region = "+gw.Region+"\n")
			cliV4 := newAWSCLIConfig(t, gw, "region = "+gw.Region+"\ns3 =\n    signature_version = s3v4\n")
			cliSign := func(cli *awsCLI) func(*testing.T, string, []presignReq) []string {
				return func(t *testing.T, bucket string, reqs []presignReq) []string {
					var urls []string
					for _, r := range reqs {
						urls = append(urls, strings.TrimSpace(cli.run(t, "s3", "presign", "s3://"+bucket+"/"+r.Key, "--expires-in", strconv.Itoa(r.Expires))))
					}
					return urls
				}
			}
			var v2 *bool
			if ver, _, err := cliDefault.try("--version"); err == nil && strings.HasPrefix(ver, "aws-cli/1.") {
				v2 = aws.Bool(true) // v1 presigns in SigV2 against a custom endpoint
			}
			signers = append(signers,
				presigner{name: "aws-cli-default", sigV2: v2, sign: cliSign(cliDefault)},
				presigner{name: "aws-cli-s3v4", sigV2: aws.Bool(false), sign: cliSign(cliV4)})
		} else {
			if testreq.Required() {
				t.Fatalf("aws cli not on PATH (%s is set: install the Debian package \"awscli\")", testreq.EnvRequire)
			}
			t.Log("aws cli not on PATH: skipping its presigned URLs")
		}
		if err := exec.Command("python3", "-c", "import boto3").Run(); err == nil {
			boto := func(sigver string) func(*testing.T, string, []presignReq) []string {
				return func(t *testing.T, bucket string, reqs []presignReq) []string {
					var list [][2]any
					for _, r := range reqs {
						list = append(list, [2]any{r.Key, r.Expires})
					}
					js, err := json.Marshal(list)
					if err != nil {
						t.Fatal(err)
					}
					py := &tool{name: "python3", env: append(withoutAWSEnv(), "SIGVER="+sigver, "ENDPOINT="+gw.Endpoint, "REGION="+gw.Region,
						"AK="+gw.AccessKey, "SK="+gw.SecretKey, "BUCKET="+bucket, "REQS="+string(js), "PYTHONIOENCODING=utf-8")}
					urls := strings.Split(strings.TrimSpace(py.run(t, "-c", boto3Presign)), "\n")
					if len(urls) != len(reqs) {
						t.Fatalf("boto3 printed %d URLs for %d requests", len(urls), len(reqs))
					}
					return urls
				}
			}
			signers = append(signers,
				presigner{name: "boto3-default", sign: boto("")},
				presigner{name: "boto3-s3v4", sigV2: aws.Bool(false), sign: boto("s3v4")},
				presigner{name: "boto3-sigv2", sigV2: aws.Bool(true), sign: boto("s3")})
		} else {
			if testreq.Required() {
				t.Fatalf("python3 with boto3 not available (%s is set: install the Debian package \"python3-boto3\")", testreq.EnvRequire)
			}
			t.Log("python3 with boto3 not available: skipping boto3's presigned URLs")
		}
		if len(signers) == 0 {
			testreq.Missing(t, "neither the aws cli nor boto3 is available")
		}

		// Per signer: both keys for 10 minutes, then the plain key for 1 s.
		reqs := []presignReq{{plain, 600}, {awkward, 600}, {plain, 1}}
		urls := map[string][]string{}
		for _, s := range signers {
			urls[s.name] = s.sign(t, bucket, reqs)
		}
		signed := time.Now()
		dir := t.TempDir()
		for _, s := range signers {
			t.Run(s.name, func(t *testing.T) {
				for i, r := range reqs[:2] {
					u := urls[s.name][i]
					isV2 := strings.Contains(u, "AWSAccessKeyId=") && strings.Contains(u, "Signature=")
					isV4 := strings.Contains(u, "X-Amz-Signature=")
					if s.sigV2 != nil && (*s.sigV2 != isV2 || isV2 == isV4) {
						t.Fatalf("%s made %s, want SigV2 %v", s.name, u, *s.sigV2)
					}
					if s.sigV2 == nil {
						t.Logf("%s presigns with SigV2 %v", s.name, isV2)
					}
					status, body := curlGet(t, gw, dir, u)
					if data := objects[r.Key]; status != http.StatusOK || sha(body) != sha(data) {
						t.Fatalf("curl %s: HTTP %d, %d bytes (want 200, %d bytes, sha %s); body %.300s", u, status, len(body), len(data), sha(data), body)
					}
					// The SigV2 signature covers Expires: moving it breaks it.
					if !isV2 {
						continue
					}
					m := regexp.MustCompile(`Expires=(\d+)`).FindStringSubmatch(u)
					if m == nil {
						t.Fatalf("no Expires in %s", u)
					}
					n, _ := strconv.ParseInt(m[1], 10, 64)
					status, body = curlGet(t, gw, dir, strings.Replace(u, m[0], fmt.Sprintf("Expires=%d", n+60), 1))
					if status != http.StatusForbidden || errorCode(body) != "SignatureDoesNotMatch" {
						t.Errorf("URL with a later Expires got HTTP %d code %q, want 403 SignatureDoesNotMatch; body %.300s", status, errorCode(body), body)
					}
				}
			})
		}

		// A URL whose lifetime is over is refused, whatever signed it.
		t.Run("expired", func(t *testing.T) {
			time.Sleep(time.Until(signed.Add(2 * time.Second))) // past Expires / X-Amz-Date + 1 s
			for _, s := range signers {
				status, body := curlGet(t, gw, dir, urls[s.name][2])
				if status != http.StatusForbidden || errorCode(body) != "AccessDenied" {
					t.Errorf("%s: expired URL got HTTP %d code %q, want 403 AccessDenied; body %.300s", s.name, status, errorCode(body), body)
				}
			}
		})
	})
}

// curlGet downloads a URL with curl (trusting the gateway's CA) and returns
// the status and the body.
func curlGet(t *testing.T, gw *testgw.Gateway, dir, u string) (int, []byte) {
	t.Helper()
	f, err := os.CreateTemp(dir, "curl-*")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	// -g: brackets and braces in the URL are literal, not a curl glob.
	args := []string{"-sS", "-g", "--max-time", "120", "-o", f.Name(), "-w", "%{http_code}"}
	if gw.CAFile != "" {
		args = append(args, "--cacert", gw.CAFile)
	}
	out := (&tool{name: "curl", env: os.Environ()}).run(t, append(args, u)...)
	status, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("curl status %q: %v", out, err)
	}
	body, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Clean(f.Name()))
	return status, body
}

// withoutAWSEnv is the process environment without AWS_* variables.
func withoutAWSEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	return env
}
