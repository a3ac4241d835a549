// Package deploy holds the deployment files; its tests check them without
// Docker, which the test machines do not run.
package deploy

import (
	"context"
	"debug/elf"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/s3gate/s3gate/internal/freeport"
	"github.com/s3gate/s3gate/internal/testreq"
)

// nonroot is the uid and gid of distroless's nonroot user, the image's USER.
const nonroot = 65532

// The lines of the Dockerfile the layout below reproduces.
var dockerfileLines = []string{
	`ARG VERSION=dev`,
	`RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/s3gate ./cmd/s3gate`,
	`RUN mkdir -m 0700 /out/data && chown 65532:65532 /out/data`,
	`COPY --from=build /out/s3gate /usr/local/bin/s3gate`,
	`COPY --from=build --chown=65532:65532 /out/data /data`,
	`ENV S3GATE_ADDR=0.0.0.0:9000 S3GATE_METRICS_ADDR=0.0.0.0:9001 S3GATE_DATA_DIR=/data`,
	`USER 65532:65532`,
	`CMD ["/usr/local/bin/s3gate", "healthcheck"]`,
	`ENTRYPOINT ["/usr/local/bin/s3gate"]`,
	`CMD ["serve"]`,
}

// TestContainerLayout builds the image's file tree without Docker (the
// Dockerfile's static build with the version ldflags, /usr/local/bin/s3gate
// and a /data owned by nonroot, mode 0700) and runs `serve` as the image's
// user on the embedded default, as the README's first `docker run` does: it
// must start, answer /healthz and pass its own healthcheck. The same tree
// with a root-owned /data (the image before /data was made) must not start,
// so the check can tell the two apart.
func TestContainerLayout(t *testing.T) {
	if os.Geteuid() != 0 {
		testreq.Missing(t, "the container check runs the gateway as uid 65532: it needs root")
	}
	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range dockerfileLines {
		if !strings.Contains(string(df), line) {
			t.Fatalf("Dockerfile has no line %q: keep it and this check in step", line)
		}
	}

	// A root the image's user can traverse (t.TempDir is 0700, root's).
	root, err := os.MkdirTemp("", "s3gate-image-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "usr/local/bin/s3gate")
	const version = "v9.9.9-containercheck"
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+version, "-o", bin, "../cmd/s3gate")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, d := range []string{"usr", "usr/local", "usr/local/bin"} {
		if err := os.Chmod(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	checkStatic(t, bin)
	if out, err := asNonroot(exec.Command(bin, "version")).Output(); err != nil || strings.TrimSpace(string(out)) != "s3gate "+version {
		t.Fatalf("s3gate version as uid %d = %q, %v; want %q (every parent of %s must be searchable by that uid)", nonroot, out, err, "s3gate "+version, root)
	}

	t.Run("data owned by nonroot", func(t *testing.T) {
		data := filepath.Join(root, "data")
		if err := os.Mkdir(data, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(data, nonroot, nonroot); err != nil {
			t.Fatal(err)
		}
		env := imageEnv(t, data)
		serve := asNonroot(exec.Command(bin, "serve"))
		serve.Env = env.vars
		// A file, not a buffer: the child writes it directly while the
		// test reads it.
		logPath := filepath.Join(t.TempDir(), "serve.log")
		logFile, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		defer logFile.Close()
		serve.Stdout, serve.Stderr = logFile, logFile
		logs := func() string {
			b, err := os.ReadFile(logPath)
			if err != nil {
				return "(serve's log: " + err.Error() + ")"
			}
			return string(b)
		}
		if err := serve.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- serve.Wait() }()
		t.Cleanup(func() {
			serve.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may have exited already
			<-exited
		})

		// Poll the image's HEALTHCHECK command, as Docker would.
		deadline := time.Now().Add(60 * time.Second)
		for {
			probe := asNonroot(exec.Command(bin, "healthcheck"))
			probe.Env = env.vars
			out, err := probe.CombinedOutput()
			if err == nil {
				break
			}
			select {
			case err := <-exited:
				t.Fatalf("serve exited: %v\n%s", err, logs())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("healthcheck still failing after 60s: %v %s\nserve:\n%s", err, out, logs())
			}
			time.Sleep(100 * time.Millisecond)
		}
		resp, err := http.Get("http://" + env.metrics + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/healthz: %d", resp.StatusCode)
		}
		// What the first start left in the volume: private, the user's.
		for name, mode := range map[string]os.FileMode{"": 0o700, "root-credentials": 0o600, "meta.db": 0o600} {
			fi, err := os.Stat(filepath.Join(data, name))
			if err != nil {
				t.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)
			if fi.Mode().Perm() != mode || st.Uid != nonroot || st.Gid != nonroot {
				t.Errorf("data/%s: mode %v owner %d:%d; want %v %d:%d", name, fi.Mode().Perm(), st.Uid, st.Gid, mode, nonroot, nonroot)
			}
		}
		if l := logs(); !strings.Contains(l, "version="+version) {
			t.Errorf("the start-up log does not report version %s:\n%s", version, l)
		}
	})

	t.Run("data owned by root", func(t *testing.T) {
		data := filepath.Join(root, "rootdata")
		if err := os.Mkdir(data, 0o755); err != nil {
			t.Fatal(err)
		}
		env := imageEnv(t, data)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		serve := asNonroot(exec.CommandContext(ctx, bin, "serve"))
		serve.Env = env.vars
		out, err := serve.CombinedOutput()
		if err == nil || ctx.Err() != nil {
			t.Fatalf("serve on a root-owned /data: %v (ctx %v); want a start-up failure\n%s", err, ctx.Err(), out)
		}
		t.Logf("serve on a root-owned /data: %v: %s", err, out)
	})
}

// asNonroot runs cmd as the image's USER, with no supplementary groups
// (what `setpriv --reuid=65532 --regid=65532 --clear-groups` does).
func asNonroot(cmd *exec.Cmd) *exec.Cmd {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nonroot, Gid: nonroot, Groups: []uint32{}}}
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	return cmd
}

type gatewayEnv struct {
	vars    []string
	metrics string
}

// imageEnv is the Dockerfile's ENV with the data directory at data and the
// listeners on free loopback ports instead of 0.0.0.0:9000 and :9001.
func imageEnv(t *testing.T, data string) gatewayEnv {
	s3, metrics := freeAddr(t), freeAddr(t)
	return gatewayEnv{
		vars:    []string{"PATH=/usr/local/bin:/usr/bin:/bin", "S3GATE_ADDR=" + s3, "S3GATE_METRICS_ADDR=" + metrics, "S3GATE_DATA_DIR=" + data},
		metrics: metrics,
	}
}

func freeAddr(t *testing.T) string { return freeport.Addr(t) }

// checkStatic fails unless bin is an ELF with no interpreter and no shared
// libraries: the distroless static image has no libc.
func checkStatic(t *testing.T, bin string) {
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatalf("%s has an ELF interpreter: not a static build", bin)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Fatalf("%s links %v (%v): not a static build", bin, libs, err)
	}
}

// TestComposeFile checks that docker-compose.yml parses and gives each
// service a health check, a restart policy and a volume, and the gateway the
// image's own health check and the version build argument.
func TestComposeFile(t *testing.T) {
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Restart     string   `yaml:"restart"`
			Volumes     []string `yaml:"volumes"`
			Healthcheck struct {
				Test []string `yaml:"test"`
			} `yaml:"healthcheck"`
			Build struct {
				Args map[string]string `yaml:"args"`
			} `yaml:"build"`
			DependsOn map[string]struct {
				Condition string `yaml:"condition"`
			} `yaml:"depends_on"`
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
		Volumes map[string]any `yaml:"volumes"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for _, name := range []string{"postgres", "s3gate"} {
		s, ok := compose.Services[name]
		if !ok {
			t.Fatalf("no service %s", name)
		}
		if s.Restart != "unless-stopped" && s.Restart != "always" {
			t.Errorf("%s: restart %q", name, s.Restart)
		}
		if len(s.Healthcheck.Test) == 0 {
			t.Errorf("%s: no healthcheck", name)
		}
		if len(s.Volumes) != 1 {
			t.Errorf("%s: volumes %v; want one", name, s.Volumes)
		} else if vol, _, _ := strings.Cut(s.Volumes[0], ":"); compose.Volumes == nil || !hasKey(compose.Volumes, vol) {
			t.Errorf("%s: volume %s is not a named volume", name, vol)
		}
	}
	gw := compose.Services["s3gate"]
	if got := strings.Join(gw.Healthcheck.Test, " "); got != "CMD /usr/local/bin/s3gate healthcheck" {
		t.Errorf("s3gate healthcheck %q", got)
	}
	if _, ok := gw.Build.Args["VERSION"]; !ok {
		t.Error("s3gate build passes no VERSION")
	}
	if gw.DependsOn["postgres"].Condition != "service_healthy" {
		t.Error("s3gate does not wait for a healthy postgres")
	}
	if !strings.Contains(gw.Environment["S3GATE_DATABASE_URL"], "@postgres:5432/") {
		t.Errorf("S3GATE_DATABASE_URL %q does not name the postgres service", gw.Environment["S3GATE_DATABASE_URL"])
	}

	ignore, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".git", "bin", "data"} {
		if !hasLine(string(ignore), want) {
			t.Errorf(".dockerignore does not exclude %s", want)
		}
	}
}

func hasKey(m map[string]any, k string) bool { _, ok := m[k]; return ok }

func hasLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}
