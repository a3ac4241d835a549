package config

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestLoad(t *testing.T) {
	base := []string{
		"S3GATE_DATABASE_URL=postgres://u@127.0.0.1/db",
		"S3GATE_ROOT_ACCESS_KEY=admin",
		"S3GATE_ROOT_SECRET_KEY=secret-secret",
	}
	tests := []struct {
		name    string
		env     []string
		args    []string
		check   func(t *testing.T, c Config)
		wantErr string // substring naming the setting
	}{
		{name: "defaults", env: base, check: func(t *testing.T, c Config) {
			if c.Addr != "127.0.0.1:9000" || c.Region != "us-east-1" || c.InlineMax != 512<<10 ||
				c.LargeEngine != EnginePGChunks || time.Duration(c.DrainTimeout) != 120*time.Second {
				t.Fatalf("unexpected defaults: %+v", c)
			}
		}},
		{name: "env sizes", env: append(base, "S3GATE_INLINE_MAX=1MiB", "S3GATE_LARGE_ENGINE=pglo"), check: func(t *testing.T, c Config) {
			if c.InlineMax != 1<<20 || c.LargeEngine != EnginePGLO {
				t.Fatalf("got %d %s", c.InlineMax, c.LargeEngine)
			}
		}},
		{name: "flag beats env", env: append(base, "S3GATE_ADDR=127.0.0.1:1"), args: []string{"-addr", "127.0.0.1:2", "-inline-max", "100k"},
			check: func(t *testing.T, c Config) {
				if c.Addr != "127.0.0.1:2" || c.InlineMax != 100<<10 {
					t.Fatalf("got %s %d", c.Addr, c.InlineMax)
				}
			}},
		{name: "bad size", env: append(base, "S3GATE_INLINE_MAX=lots"), wantErr: "S3GATE_INLINE_MAX"},
		{name: "too large knee", env: append(base, "S3GATE_INLINE_MAX=1GiB"), wantErr: "S3GATE_INLINE_MAX"},
		{name: "bad engine", env: append(base, "S3GATE_LARGE_ENGINE=s3"), wantErr: "S3GATE_LARGE_ENGINE"},
		{name: "half key", env: base[:2], wantErr: "S3GATE_ROOT_ACCESS_KEY"},
		{name: "no keys is fine", env: base[:1], check: func(t *testing.T, c Config) {
			if c.RootAccess != "" || c.RootSecret != "" {
				t.Fatalf("keys invented by config: %+v", c)
			}
		}},
		{name: "embedded default", env: nil, check: func(t *testing.T, c Config) {
			if c.DatabaseURL != "" || c.LargeEngine != EngineLocal || c.DataDir != "./data" {
				t.Fatalf("embedded default: %+v", c)
			}
		}},
		{name: "pg engine without database", env: []string{"S3GATE_LARGE_ENGINE=pglo"}, wantErr: "S3GATE_DATABASE_URL"},
		{name: "half tls", env: append(base, "S3GATE_TLS_CERT_FILE=/x"), wantErr: "S3GATE_TLS_CERT_FILE"},
		{name: "bad duration", env: append(base, "S3GATE_DRAIN_TIMEOUT=soon"), wantErr: "S3GATE_DRAIN_TIMEOUT"},
		{name: "drain at the bound", env: append(base, "S3GATE_DRAIN_TIMEOUT=120s"), check: func(t *testing.T, c Config) {
			if time.Duration(c.DrainTimeout) != MaxDrainTimeout {
				t.Fatalf("drain timeout %v", c.DrainTimeout)
			}
		}},
		{name: "drain above the bound", env: append(base, "S3GATE_DRAIN_TIMEOUT=121s"), wantErr: "S3GATE_DRAIN_TIMEOUT"},
		{name: "drain flag above the bound", env: base, args: []string{"-drain-timeout", "3m"}, wantErr: "S3GATE_DRAIN_TIMEOUT"},
		{name: "bad log format", env: append(base, "S3GATE_LOG_FORMAT=xml"), wantErr: "S3GATE_LOG_FORMAT"},
		{name: "connection cap and db wait", env: base, check: func(t *testing.T, c Config) {
			if c.MaxClientConns != 1024 || time.Duration(c.DBWait) != 60*time.Second {
				t.Fatalf("defaults: MAX_CONNS %d, DB_WAIT %s", c.MaxClientConns, time.Duration(c.DBWait))
			}
		}},
		{name: "connection cap flag", env: base, args: []string{"-max-conns", "10", "-db-wait", "5s"}, check: func(t *testing.T, c Config) {
			if c.MaxClientConns != 10 || time.Duration(c.DBWait) != 5*time.Second {
				t.Fatalf("got %d %s", c.MaxClientConns, time.Duration(c.DBWait))
			}
		}},
		{name: "zero connection cap", env: append(base, "S3GATE_MAX_CONNS=0"), wantErr: "S3GATE_MAX_CONNS"},
		{name: "bandwidth suffixes", env: append(base, "S3GATE_BANDWIDTH_PER_REQUEST=10MiB", "S3GATE_BANDWIDTH_GLOBAL=1GB"), check: func(t *testing.T, c Config) {
			if c.BandwidthPerRequest != 10<<20 || c.BandwidthGlobal != 1<<30 {
				t.Fatalf("got %d %d", c.BandwidthPerRequest, c.BandwidthGlobal)
			}
		}},
		{name: "bad bandwidth", env: append(base, "S3GATE_BANDWIDTH_GLOBAL=fast"), wantErr: "S3GATE_BANDWIDTH_GLOBAL"},
		{name: "bad standby", env: append(base, "S3GATE_STANDBY=maybe"), wantErr: "S3GATE_STANDBY"},
		{name: "bad pin cap", env: append(base, "S3GATE_MAX_PINS=0"), wantErr: "S3GATE_MAX_PINS"},
		{name: "unknown flag", env: base, args: []string{"-nope"}, wantErr: "nope"},
		{name: "metrics default", env: base, check: func(t *testing.T, c Config) {
			if c.MetricsAddr != "127.0.0.1:9001" {
				t.Fatalf("metrics address %q", c.MetricsAddr)
			}
		}},
		{name: "metrics set", env: append(base, "S3GATE_METRICS_ADDR=0.0.0.0:9101"), check: func(t *testing.T, c Config) {
			if c.MetricsAddr != "0.0.0.0:9101" {
				t.Fatalf("metrics address %q", c.MetricsAddr)
			}
		}},
		{name: "metrics off", env: append(base, "S3GATE_METRICS_ADDR=off"), check: func(t *testing.T, c Config) {
			if c.MetricsAddr != "" {
				t.Fatalf("metrics address %q, want disabled", c.MetricsAddr)
			}
		}},
		{name: "metrics empty env", env: append(base, "S3GATE_METRICS_ADDR="), check: func(t *testing.T, c Config) {
			if c.MetricsAddr != "" {
				t.Fatalf("metrics address %q, want disabled", c.MetricsAddr)
			}
		}},
		{name: "metrics empty flag", env: base, args: []string{"-metrics-addr", ""}, check: func(t *testing.T, c Config) {
			if c.MetricsAddr != "" {
				t.Fatalf("metrics address %q, want disabled", c.MetricsAddr)
			}
		}},
		{name: "metrics bad", env: append(base, "S3GATE_METRICS_ADDR=9001"), wantErr: "S3GATE_METRICS_ADDR"},
		{name: "metrics on the S3 address", env: append(base, "S3GATE_METRICS_ADDR=127.0.0.1:9000"), wantErr: "S3GATE_METRICS_ADDR"},
		{name: "idle timeouts default", env: base, check: func(t *testing.T, c Config) {
			if time.Duration(c.ReadIdleTimeout) != time.Minute || time.Duration(c.WriteIdleTimeout) != time.Minute {
				t.Fatalf("idle timeouts %v / %v, want 60s", c.ReadIdleTimeout, c.WriteIdleTimeout)
			}
		}},
		{name: "idle timeouts set", env: append(base, "S3GATE_READ_IDLE_TIMEOUT=2s"), args: []string{"-write-idle-timeout", "1500ms"}, check: func(t *testing.T, c Config) {
			if time.Duration(c.ReadIdleTimeout) != 2*time.Second || time.Duration(c.WriteIdleTimeout) != 1500*time.Millisecond {
				t.Fatalf("idle timeouts %v / %v", c.ReadIdleTimeout, c.WriteIdleTimeout)
			}
		}},
		{name: "bad read idle timeout", env: append(base, "S3GATE_READ_IDLE_TIMEOUT=never"), wantErr: "S3GATE_READ_IDLE_TIMEOUT"},
		{name: "zero write idle timeout", env: append(base, "S3GATE_WRITE_IDLE_TIMEOUT=0s"), wantErr: "S3GATE_WRITE_IDLE_TIMEOUT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(tc.args, tc.env, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Fatalf("error spans lines: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "512KiB": 512 << 10, "4MiB": 4 << 20, "10MB": 10 << 20, "1G": 1 << 30, "7": 7, "3B": 3} {
		got, err := ParseByteSize(in)
		if err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "x", "1.5MiB", "99999999999999GiB"} {
		if _, err := ParseByteSize(in); err == nil {
			t.Errorf("ParseByteSize(%q) succeeded", in)
		}
	}
}

// TestBoolFlags: a boolean setting's flag may stand alone (-fleet), take a
// value (-fleet=false), and wins over the environment like every flag.
func TestBoolFlags(t *testing.T) {
	base := []string{"S3GATE_DATABASE_URL=postgres://u@127.0.0.1/db"}
	for _, tc := range []struct {
		env         []string
		args        []string
		fleet, smed bool
	}{
		{nil, nil, false, false},
		{nil, []string{"-fleet"}, true, false},
		{nil, []string{"-fleet", "-shared-media"}, true, true},
		{[]string{"S3GATE_FLEET=true"}, []string{"-fleet=false"}, false, false},
		{[]string{"S3GATE_FLEET=true", "S3GATE_SHARED_MEDIA=1"}, nil, true, true},
	} {
		c, err := Load(tc.args, append(append([]string{}, base...), tc.env...), io.Discard)
		if err != nil || c.Fleet != tc.fleet || c.SharedMedia != tc.smed {
			t.Errorf("env %v args %v: fleet %v shared %v, %v; want %v %v", tc.env, tc.args, c.Fleet, c.SharedMedia, err, tc.fleet, tc.smed)
		}
	}
	if !IsBoolFlag("fleet") || IsBoolFlag("addr") {
		t.Error("IsBoolFlag")
	}
}

// TestBadFlagOneLine: a flag Load does not know is one line in the error,
// with nothing written (before, the flag package dumped every setting).
func TestBadFlagOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-bogus"}, "flag provided but not defined: -bogus (--help lists the settings)"},
		{[]string{"-addr"}, "flag needs an argument: -addr (--help lists the settings)"},
	} {
		var out strings.Builder
		_, err := Load(tc.args, nil, &out)
		if err == nil || err.Error() != tc.want || out.Len() != 0 {
			t.Errorf("Load(%q) = %v, wrote %q; want %q and nothing written", tc.args, err, out.String(), tc.want)
		}
	}
}
