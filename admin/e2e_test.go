package admin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/s3gate/s3gate/auth"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/s3api"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/embedded"
	"github.com/s3gate/s3gate/store/pg"
)

const (
	rootAK = "e2erootkey"
	rootSK = "e2e-root-secret-0123456789"
	region = "us-east-1"
)

// engine is what the test gateway needs from a metadata engine.
type engine interface {
	store.ObjectStore
	store.KeyStore
}

// gateway assembles a gateway the way server wires managed keys:
// auth.Keyring over the engine as the Verifier's credentials, and the
// engine's keys as s3api's identities (policy evaluation). It returns the endpoint and the
// config flags that point `admin` at the same store.
func gateway(t *testing.T, name string) (endpoint string, adminFlags []string) {
	t.Helper()
	ctx := context.Background()
	var eng engine
	switch name {
	case "embedded":
		dir := t.TempDir()
		e, err := embedded.Open(ctx, embedded.Config{Dir: dir, Region: region})
		if err != nil {
			t.Fatalf("embedded.Open: %v", err)
		}
		t.Cleanup(func() { _ = e.Close() })
		eng, adminFlags = e, []string{"-database-url=", "-data-dir", dir}
	case "pgchunks":
		dsn := pgtest.DSN(t)
		e, err := pg.Open(ctx, pg.Config{DatabaseURL: dsn, Large: pg.LargePGChunks, Region: region})
		if err != nil {
			t.Fatalf("pg.Open: %v", err)
		}
		t.Cleanup(e.Close)
		eng, adminFlags = e, []string{"-database-url", dsn}
	default:
		t.Fatalf("unknown engine %q", name)
	}
	kr := &auth.Keyring{RootAccessKey: rootAK, RootSecretKey: rootSK, Keys: eng}
	h := s3api.New(s3api.Config{Region: region, Identities: s3api.KeyIdentities{Root: rootAK, Keys: eng}},
		store.New(eng), &auth.Verifier{Region: region, Creds: kr}, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	// The root key of the configuration, as serve would have it.
	adminFlags = append(adminFlags, "-root-access-key", rootAK, "-root-secret-key", rootSK)
	return srv.URL, adminFlags
}

func client(endpoint, ak, sk string) *s3.Client {
	cfg := aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider(ak, sk, "")}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
	})
}

// createKey runs `admin key create` through Run and returns the new pair.
func createKey(t *testing.T, flags []string, args ...string) (id, secret string) {
	t.Helper()
	var out, errb bytes.Buffer
	all := append(append([]string{"key", "create"}, args...), flags...)
	if code := Run(context.Background(), all, &out, &errb); code != 0 {
		t.Fatalf("admin %q: exit %d: %s", args, code, errb.String())
	}
	id, secret = field(out.String(), "access key id"), field(out.String(), "secret access key")
	if id == "" || secret == "" {
		t.Fatalf("admin key create printed %q", out.String())
	}
	return id, secret
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	if err != nil {
		return "non-API error: " + err.Error()
	}
	return ""
}

func put(c *s3.Client, bucket, key, body string) error {
	_, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)})
	return err
}

func get(c *s3.Client, bucket, key string) (string, error) {
	out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return "", err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	return string(b), err
}

func bucketNames(t *testing.T, c *s3.Client) []string {
	t.Helper()
	out, err := c.ListBuckets(context.Background(), &s3.ListBucketsInput{})
	if err != nil {
		t.Fatalf("ListBuckets: %v", err)
	}
	var names []string
	for _, b := range out.Buckets {
		names = append(names, aws.ToString(b.Name))
	}
	return names
}

func TestManagedKeysEndToEnd(t *testing.T) {
	for _, name := range []string{"embedded", "pgchunks"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			endpoint, flags := gateway(t, name)
			root := client(endpoint, rootAK, rootSK)
			for _, b := range []string{"alpha", "beta"} {
				if _, err := root.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
					t.Fatalf("root CreateBucket %s: %v", b, err)
				}
			}
			if err := put(root, "beta", "secret.txt", "beta data"); err != nil {
				t.Fatalf("root put: %v", err)
			}

			// A key limited to alpha works at once, in alpha only.
			aID, aSecret := createKey(t, flags, "-buckets", "alpha")
			scoped := client(endpoint, aID, aSecret)
			if err := put(scoped, "alpha", "a.txt", "alpha data"); err != nil {
				t.Fatalf("scoped key PutObject in its bucket: %v", err)
			}
			if got, err := get(scoped, "alpha", "a.txt"); err != nil || got != "alpha data" {
				t.Fatalf("scoped key GetObject: %q %v", got, err)
			}
			if err := put(scoped, "beta", "b.txt", "nope"); apiCode(err) != "AccessDenied" {
				t.Errorf("scoped key PutObject in beta: %v, want AccessDenied", err)
			}
			if _, err := get(scoped, "beta", "secret.txt"); apiCode(err) != "AccessDenied" {
				t.Errorf("scoped key GetObject in beta: %v, want AccessDenied", err)
			}
			_, err := scoped.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("alpha"), Key: aws.String("stolen"), CopySource: aws.String("beta/secret.txt")})
			if apiCode(err) != "AccessDenied" {
				t.Errorf("scoped key copy out of beta: %v, want AccessDenied", err)
			}
			if got := bucketNames(t, scoped); !slices.Equal(got, []string{"alpha"}) {
				t.Errorf("scoped key ListBuckets = %v, want [alpha]", got)
			}
			if got := bucketNames(t, root); !slices.Equal(got, []string{"alpha", "beta"}) {
				t.Errorf("root ListBuckets = %v", got)
			}
			for _, k := range []string{"beta/b.txt", "alpha/stolen"} {
				b, key, _ := strings.Cut(k, "/")
				if _, err := root.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String(key)}); apiCode(err) != "NotFound" {
					t.Errorf("refused request stored %s: %v", k, err)
				}
			}

			// A read-only key reads but is refused a PUT, which stores nothing.
			roID, roSecret := createKey(t, flags, "-read-only")
			ro := client(endpoint, roID, roSecret)
			if got, err := get(ro, "beta", "secret.txt"); err != nil || got != "beta data" {
				t.Fatalf("read-only GetObject: %q %v", got, err)
			}
			if err := put(ro, "alpha", "ro.txt", "nope"); apiCode(err) != "AccessDenied" {
				t.Errorf("read-only PutObject: %v, want AccessDenied", err)
			}
			if _, err := root.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("alpha"), Key: aws.String("ro.txt")}); apiCode(err) != "NotFound" {
				t.Errorf("refused read-only PUT stored the object: %v", err)
			}
			if _, err := ro.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("alpha"), Key: aws.String("a.txt")}); apiCode(err) != "AccessDenied" {
				t.Errorf("read-only DeleteObject: %v, want AccessDenied", err)
			}
			if got, err := get(root, "alpha", "a.txt"); err != nil || got != "alpha data" {
				t.Errorf("object after refused delete: %q %v", got, err)
			}

			// A deleted key is refused at once.
			var out, errb bytes.Buffer
			if code := Run(ctx, append([]string{"key", "delete", aID}, flags...), &out, &errb); code != 0 {
				t.Fatalf("admin key delete: exit %d: %s", code, errb.String())
			}
			if err := put(scoped, "alpha", "after.txt", "x"); apiCode(err) != "InvalidAccessKeyId" {
				t.Errorf("deleted key PutObject: %v, want InvalidAccessKeyId", err)
			}
			if _, err := get(scoped, "alpha", "a.txt"); apiCode(err) != "InvalidAccessKeyId" {
				t.Errorf("deleted key GetObject: %v, want InvalidAccessKeyId", err)
			}
			// The root key always works.
			if err := put(root, "alpha", "root.txt", "r"); err != nil {
				t.Errorf("root PutObject: %v", err)
			}

			out.Reset()
			if code := Run(ctx, append([]string{"key", "list"}, flags...), &out, &errb); code != 0 {
				t.Fatalf("admin key list: exit %d: %s", code, errb.String())
			}
			if l := out.String(); strings.Contains(l, aID) || !strings.Contains(l, roID) || strings.Contains(l, roSecret) {
				t.Errorf("admin key list:\n%s", l)
			}
		})
	}
}
