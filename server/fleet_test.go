package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/server"
)

// tryNew runs server.New on env (beside the root key) and returns its
// error; a server it built is closed.
func tryNew(t *testing.T, env ...string) error {
	t.Helper()
	cfg, err := config.Load(nil, append([]string{"S3GATE_ROOT_ACCESS_KEY=" + testgw.AccessKey,
		"S3GATE_ROOT_SECRET_KEY=" + testgw.SecretKey, "S3GATE_METRICS_ADDR=off"}, env...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		srv.Close()
	}
	return err
}

// TestFleetRefusals: the fleet-validity predicate refuses each invalid
// configuration with one line naming the clause that failed. The shared-
// media probe's two refusals follow a first instance that wrote the marker.
func TestFleetRefusals(t *testing.T) {
	dsn := pgtest.DSN(t)
	shared := t.TempDir()
	// The first instance on local media writes the marker and records it.
	testgw.Start(t, testgw.Options{Engine: config.EngineLocal, DatabaseURL: dsn,
		Env: []string{"S3GATE_FLEET=true", "S3GATE_SHARED_MEDIA=true", "S3GATE_DATA_DIR=" + shared}})
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var by string
	var at time.Time
	if err := conn.QueryRow(context.Background(), `SELECT written_by, created_at FROM fleet_media`).Scan(&by, &at); err != nil {
		t.Fatal(err)
	}
	stamp := at.UTC().Format(time.RFC3339)
	other := t.TempDir() // not the shared media: no marker
	forged := t.TempDir()
	if err := os.WriteFile(filepath.Join(forged, "fleet-media-marker"), []byte("0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"embedded default", []string{"S3GATE_FLEET=true", "S3GATE_DATA_DIR=" + t.TempDir()},
			"S3GATE_FLEET (-fleet): fleet mode needs metadata on PostgreSQL (S3GATE_DATABASE_URL (-database-url)): the embedded default serves one process only"},
		{"local media not declared shared", []string{"S3GATE_FLEET=true", "S3GATE_DATABASE_URL=" + dsn, "S3GATE_LARGE_ENGINE=local", "S3GATE_DATA_DIR=" + shared},
			"S3GATE_FLEET (-fleet): fleet mode with S3GATE_LARGE_ENGINE=local needs media that every instance shares: mount S3GATE_DATA_DIR on shared storage (NFS, CephFS) and set S3GATE_SHARED_MEDIA=true, or keep large content in PostgreSQL (pgchunks, pglo)"},
		{"declared shared, marker missing", []string{"S3GATE_FLEET=true", "S3GATE_SHARED_MEDIA=true", "S3GATE_DATABASE_URL=" + dsn, "S3GATE_LARGE_ENGINE=local", "S3GATE_DATA_DIR=" + other},
			fmt.Sprintf("S3GATE_SHARED_MEDIA (-shared-media): S3GATE_DATA_DIR is not the shared media of this fleet: the marker that instance %s wrote at %s is missing here (%s)",
				by, stamp, filepath.Join(other, "fleet-media-marker"))},
		{"declared shared, another marker", []string{"S3GATE_FLEET=true", "S3GATE_SHARED_MEDIA=true", "S3GATE_DATABASE_URL=" + dsn, "S3GATE_LARGE_ENGINE=local", "S3GATE_DATA_DIR=" + forged},
			fmt.Sprintf("S3GATE_SHARED_MEDIA (-shared-media): S3GATE_DATA_DIR is not the shared media of this fleet: %s holds another marker than the one instance %s wrote at %s",
				filepath.Join(forged, "fleet-media-marker"), by, stamp)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tryNew(t, tc.env...)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("New: %v\nwant: %s", err, tc.want)
			}
		})
	}
	// The refused instances left no registration behind; the first one is live.
	list, err := fleet.ListInstances(context.Background(), conn)
	if err != nil || len(list) != 1 || string(list[0].ID) != by {
		t.Fatalf("registry %+v, %v; want only %s", list, err, by)
	}
	// The shared directory itself passes the probe; a declaration of shared
	// media without fleet mode changes nothing (and takes the claim as ever).
	for _, env := range [][]string{
		{"S3GATE_FLEET=true", "S3GATE_SHARED_MEDIA=true", "S3GATE_DATABASE_URL=" + dsn, "S3GATE_LARGE_ENGINE=local", "S3GATE_DATA_DIR=" + shared},
		{"S3GATE_SHARED_MEDIA=true", "S3GATE_DATA_DIR=" + t.TempDir()},
	} {
		if err := tryNew(t, env...); err != nil {
			t.Errorf("%v: %v", env, err)
		}
	}
}

// TestFleetInstancesServeTogether: two fleet instances on one database both
// start (neither takes the writer claim), both register, a PUT through one is
// read through the other at once, and each reports fleet mode and the
// registry.s size.
func TestFleetInstancesServeTogether(t *testing.T) {
	dsn := pgtest.DSN(t)
	env := []string{"S3GATE_FLEET=true", "S3GATE_INSTANCE_TTL=3s", "S3GATE_GC_INTERVAL=1h"}
	a := testgw.Start(t, testgw.Options{Engine: config.EnginePGChunks, DatabaseURL: dsn, Env: env})
	b := testgw.Start(t, testgw.Options{Engine: config.EnginePGChunks, DatabaseURL: dsn, Env: env})
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if pid := claimHolder(t, conn); pid != 0 {
		t.Fatalf("backend %d holds the writer claim in fleet mode", pid)
	}
	ctx := context.Background()
	ca, cb := sdkClient(a), sdkClient(b)
	if _, err := ca.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("fleet")}); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("fleet"), 300_000) // above the knee
	if _, err := ca.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("fleet"), Key: aws.String("k"), Body: bytes.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
	out, err := cb.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("fleet"), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(out.Body)
	_ = out.Body.Close()
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("GET through the other instance: %d bytes, %v", len(got), err)
	}
	for _, gw := range []*testgw.Gateway{a, b} {
		deadline := time.Now().Add(waitLimit)
		for {
			sc := scrapeMetrics(t, gw.MetricsURL)
			if sc.v("s3gate_fleet_mode") == 1 && sc.v("s3gate_fleet_instances") == 2 && sc.v("s3gate_role", "role", server.RoleOwner) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: fleet_mode %v, fleet_instances %v, role owner %v", gw.Endpoint,
					sc.v("s3gate_fleet_mode"), sc.v("s3gate_fleet_instances"), sc.v("s3gate_role", "role", server.RoleOwner))
			}
			time.Sleep(50 * time.Millisecond)
		}
		if code, _ := get(t, gw.MetricsURL+"/readyz"); code != 200 {
			t.Errorf("%s: /readyz %d", gw.Endpoint, code)
		}
	}
	list, err := fleet.ListInstances(ctx, conn)
	if err != nil || len(list) != 2 || !list[0].Live || !list[1].Live {
		t.Fatalf("registry %+v, %v", list, err)
	}
}

// TestFleetAndSingleRefuseEachOther: a single-instance gateway on a database
// that fleet instances serve refuses to start (it would not wait as a
// standby: the fleet holds no claim to wait for), and a fleet instance on a
// database a single instance owns refuses too; each says why in one line.
func TestFleetAndSingleRefuseEachOther(t *testing.T) {
	fleetEnv := []string{"S3GATE_FLEET=true", "S3GATE_INSTANCE_TTL=3s", "S3GATE_GC_INTERVAL=1h"}
	tests := []struct {
		name        string
		first, then []string
		want        string
	}{
		{"single beside a fleet", fleetEnv, nil, "fleet instance(s) are registered live"},
		{"fleet beside a single instance", nil, fleetEnv, "a single-instance gateway holds the writer claim"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dsn := pgtest.DSN(t)
			testgw.Start(t, testgw.Options{Engine: config.EnginePGChunks, DatabaseURL: dsn, Env: tc.first})
			err := tryNew(t, append([]string{"S3GATE_DATABASE_URL=" + dsn, "S3GATE_ENGINE=pgchunks", "S3GATE_STANDBY=wait"}, tc.then...)...)
			if !errors.Is(err, fleet.ErrModeConflict) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("second gateway: %v; want one line with ErrModeConflict naming %q", err, tc.want)
			}
		})
	}
}
