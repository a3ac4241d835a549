package config

import (
	"io"
	"reflect"
	"testing"
)

// TestSettingErrors: every setting's bad value stops Load with one line in
// the one form: the variable, its flag, what is wrong and the form expected.
// A setting added without a row here (or in anyValue) fails the test.
func TestSettingErrors(t *testing.T) {
	base := []string{"S3GATE_DATABASE_URL=postgres://u:pw@127.0.0.1/db"}
	size := `is not a size: bytes, or a whole number with a unit such as 512KiB, 4MB or 1g (any case; KB = KiB = 1024 bytes)`
	dur := `is not a duration (a number with a unit: 500ms, 120s, 2m, 1h30m)`
	tests := []struct {
		key  string
		env  []string // beside base
		args []string
		want string
	}{
		{"ADDR", []string{"S3GATE_ADDR=9000"}, nil, `S3GATE_ADDR (-addr): "9000" is not host:port (for example 127.0.0.1:9000 or :9000)`},
		{"DATABASE_URL", []string{"S3GATE_DATABASE_URL=host=db password=pw"}, nil,
			`S3GATE_DATABASE_URL (-database-url): not a URL of the form postgres://user:password@host:5432/database`},
		{"ROOT_ACCESS_KEY", []string{"S3GATE_ROOT_ACCESS_KEY=ab", "S3GATE_ROOT_SECRET_KEY=secret-secret"}, nil,
			`S3GATE_ROOT_ACCESS_KEY (-root-access-key): too short: at least 3 characters`},
		{"ROOT_SECRET_KEY", []string{"S3GATE_ROOT_ACCESS_KEY=admin", "S3GATE_ROOT_SECRET_KEY=short"}, nil,
			`S3GATE_ROOT_SECRET_KEY (-root-secret-key): too short: at least 8 characters`},
		{"ROOT_SECRET_KEY", []string{"S3GATE_ROOT_ACCESS_KEY=admin"}, nil,
			`S3GATE_ROOT_ACCESS_KEY (-root-access-key) / S3GATE_ROOT_SECRET_KEY (-root-secret-key): set both or neither (neither: a key pair is generated in the data directory)`},
		{"REGION", []string{"S3GATE_REGION=us east"}, nil, `S3GATE_REGION (-region): "us east" is not a region name (a SigV4 scope part, such as us-east-1)`},
		{"INLINE_MAX", []string{"S3GATE_INLINE_MAX=lots"}, nil, `S3GATE_INLINE_MAX (-inline-max): "lots" ` + size},
		{"INLINE_MAX", nil, []string{"-inline-max", "1GiB"}, `S3GATE_INLINE_MAX (-inline-max): 1073741824 bytes is not between 0 and 64MiB`},
		{"LARGE_ENGINE", []string{"S3GATE_LARGE_ENGINE=s3"}, nil, `S3GATE_LARGE_ENGINE (-large-engine): "s3" is not one of pgchunks, pglo, local`},
		{"TLS_CERT_FILE", []string{"S3GATE_TLS_CERT_FILE=/c.pem"}, nil,
			`S3GATE_TLS_CERT_FILE (-tls-cert-file) / S3GATE_TLS_KEY_FILE (-tls-key-file): set both or neither`},
		{"TLS_KEY_FILE", []string{"S3GATE_TLS_KEY_FILE=/k.pem"}, nil,
			`S3GATE_TLS_CERT_FILE (-tls-cert-file) / S3GATE_TLS_KEY_FILE (-tls-key-file): set both or neither`},
		{"LOG_FORMAT", []string{"S3GATE_LOG_FORMAT=xml"}, nil, `S3GATE_LOG_FORMAT (-log-format): "xml" is not text or json`},
		{"LOG_LEVEL", []string{"S3GATE_LOG_LEVEL=loud"}, nil, `S3GATE_LOG_LEVEL (-log-level): "loud" is not debug, info, warn or error`},
		{"DRAIN_TIMEOUT", []string{"S3GATE_DRAIN_TIMEOUT=soon"}, nil, `S3GATE_DRAIN_TIMEOUT (-drain-timeout): "soon" ` + dur},
		{"DRAIN_TIMEOUT", nil, []string{"-drain-timeout", "3m"}, `S3GATE_DRAIN_TIMEOUT (-drain-timeout): 3m0s is above the 2m0s bound on the whole shutdown`},
		{"DB_MAX_CONNS", []string{"S3GATE_DB_MAX_CONNS=many"}, nil, `S3GATE_DB_MAX_CONNS (-db-max-conns): "many" is not a whole number`},
		{"DB_MAX_CONNS", []string{"S3GATE_DB_MAX_CONNS=2"}, nil, `S3GATE_DB_MAX_CONNS (-db-max-conns): 2 is too small: at least 4`},
		{"DB_READ_LANES", []string{"S3GATE_DB_READ_LANES=-1"}, nil, `S3GATE_DB_READ_LANES (-db-read-lanes): -1 is out of range: 0 (off) to 31, below S3GATE_DB_MAX_CONNS (-db-max-conns)`},
		{"DB_READ_LANES", []string{"S3GATE_DB_READ_LANES=8", "S3GATE_DB_MAX_CONNS=8"}, nil, `S3GATE_DB_READ_LANES (-db-read-lanes): 8 is out of range: 0 (off) to 7, below S3GATE_DB_MAX_CONNS (-db-max-conns)`},
		{"BANDWIDTH_GLOBAL", []string{"S3GATE_BANDWIDTH_GLOBAL=fast"}, nil,
			`S3GATE_BANDWIDTH_GLOBAL (-bandwidth-global): "fast" is not a rate: bytes, or a whole number with a unit such as 512KiB, 4MB or 1g (any case; KB = KiB = 1024 bytes), per second (an optional /s)`},
		{"BANDWIDTH_PER_REQUEST", []string{"S3GATE_BANDWIDTH_PER_REQUEST=-1"}, nil,
			`S3GATE_BANDWIDTH_PER_REQUEST (-bandwidth-per-request): "-1" is not a rate: bytes, or a whole number with a unit such as 512KiB, 4MB or 1g (any case; KB = KiB = 1024 bytes), per second (an optional /s)`},
		{"MAX_PINS", []string{"S3GATE_MAX_PINS=none"}, nil, `S3GATE_MAX_PINS (-max-pins): "none" is not a whole number`},
		{"MAX_PINS", nil, []string{"-max-pins", "0"}, `S3GATE_MAX_PINS (-max-pins): 0 is too small: at least 1`},
		{"STANDBY", []string{"S3GATE_STANDBY=maybe"}, nil, `S3GATE_STANDBY (-standby): "maybe" is not wait or refuse`},
		{"GC_INTERVAL", []string{"S3GATE_GC_INTERVAL=hourly"}, nil, `S3GATE_GC_INTERVAL (-gc-interval): "hourly" ` + dur},
		{"GC_GRACE", []string{"S3GATE_GC_GRACE=-1m"}, nil, `S3GATE_GC_GRACE (-gc-grace): "-1m" ` + dur},
		{"UPLOAD_EXPIRY", []string{"S3GATE_UPLOAD_EXPIRY=7d"}, nil, `S3GATE_UPLOAD_EXPIRY (-upload-expiry): "7d" ` + dur},
		{"METRICS_ADDR", []string{"S3GATE_METRICS_ADDR=nope"}, nil, `S3GATE_METRICS_ADDR (-metrics-addr): "nope" is not host:port (or off)`},
		{"METRICS_ADDR", []string{"S3GATE_ADDR=127.0.0.1:9000", "S3GATE_METRICS_ADDR=127.0.0.1:9000"}, nil,
			`S3GATE_METRICS_ADDR (-metrics-addr): must differ from S3GATE_ADDR (-addr) (127.0.0.1:9000)`},
		{"METRICS_STATS_TTL", []string{"S3GATE_METRICS_STATS_TTL=10"}, nil, `S3GATE_METRICS_STATS_TTL (-metrics-stats-ttl): "10" ` + dur},
		{"MAX_CONNS", []string{"S3GATE_MAX_CONNS=0"}, nil, `S3GATE_MAX_CONNS (-max-conns): 0 is too small: at least 1`},
		{"MAX_CONNS", nil, []string{"-max-conns", "1e3"}, `S3GATE_MAX_CONNS (-max-conns): "1e3" is not a whole number`},
		{"DB_WAIT", []string{"S3GATE_DB_WAIT=forever"}, nil, `S3GATE_DB_WAIT (-db-wait): "forever" ` + dur},
		{"READ_IDLE_TIMEOUT", []string{"S3GATE_READ_IDLE_TIMEOUT=never"}, nil, `S3GATE_READ_IDLE_TIMEOUT (-read-idle-timeout): "never" ` + dur},
		{"WRITE_IDLE_TIMEOUT", []string{"S3GATE_WRITE_IDLE_TIMEOUT=0s"}, nil, `S3GATE_WRITE_IDLE_TIMEOUT (-write-idle-timeout): 0s is not positive`},
		{"BLOCK_PUBLIC_ACCESS", []string{"S3GATE_BLOCK_PUBLIC_ACCESS=maybe"}, nil, `S3GATE_BLOCK_PUBLIC_ACCESS (-block-public-access): "maybe" is not true or false`},
		{"FLEET", []string{"S3GATE_FLEET=yes"}, nil, `S3GATE_FLEET (-fleet): "yes" is not true or false`},
		{"FLEET", nil, []string{"-fleet=maybe"}, `S3GATE_FLEET (-fleet): "maybe" is not true or false`},
		{"SHARED_MEDIA", []string{"S3GATE_SHARED_MEDIA=nfs"}, nil, `S3GATE_SHARED_MEDIA (-shared-media): "nfs" is not true or false`},
		{"METADATA_CACHE", []string{"S3GATE_METADATA_CACHE=on"}, nil, `S3GATE_METADATA_CACHE (-metadata-cache): "on" is not true or false`},
		{"LIFECYCLE_INTERVAL", []string{"S3GATE_LIFECYCLE_INTERVAL=daily"}, nil, `S3GATE_LIFECYCLE_INTERVAL (-lifecycle-interval): "daily" ` + dur},
		{"LIFECYCLE_DAY", []string{"S3GATE_LIFECYCLE_DAY=10ms"}, nil, `S3GATE_LIFECYCLE_DAY (-lifecycle-day): 10ms is under the minimum 1s`},
		{"INSTANCE_TTL", []string{"S3GATE_INSTANCE_TTL=1s"}, nil, `S3GATE_INSTANCE_TTL (-instance-ttl): 1s is not between 3s and 10m0s`},
		{"INSTANCE_TTL", []string{"S3GATE_INSTANCE_TTL=soon"}, nil, `S3GATE_INSTANCE_TTL (-instance-ttl): "soon" ` + dur},
		{"READ_ONLY", []string{"S3GATE_READ_ONLY=sometimes"}, nil, `S3GATE_READ_ONLY (-read-only): "sometimes" is not true or false`},
		{"READ_ONLY", []string{"S3GATE_DATABASE_URL=", "S3GATE_READ_ONLY=true"}, nil,
			`S3GATE_READ_ONLY (-read-only): needs S3GATE_DATABASE_URL (-database-url): a read replica serves a PostgreSQL database`},
		{"PIN_MODE", []string{"S3GATE_PIN_MODE=locks"}, nil, `S3GATE_PIN_MODE (-pin-mode): "locks" is not session or rows`},
		{"PIN_MODE", []string{"S3GATE_DATABASE_URL=", "S3GATE_PIN_MODE=rows"}, nil,
			`S3GATE_PIN_MODE (-pin-mode): rows needs S3GATE_DATABASE_URL (-database-url): the embedded default pins in process`},
		{"PIN_TTL", []string{"S3GATE_PIN_TTL=100ms"}, nil, `S3GATE_PIN_TTL (-pin-ttl): 100ms is under the minimum 300ms`},
		{"DIRECT_DATABASE_URL", []string{"S3GATE_DIRECT_DATABASE_URL=host=db"}, nil,
			`S3GATE_DIRECT_DATABASE_URL (-direct-database-url): not a URL of the form postgres://user:password@host:5432/database`},
		{"DIRECT_DATABASE_URL", []string{"S3GATE_DATABASE_URL=", "S3GATE_DIRECT_DATABASE_URL=postgres://u@h/db"}, nil,
			`S3GATE_DIRECT_DATABASE_URL (-direct-database-url): needs S3GATE_DATABASE_URL (-database-url)`},
	}
	// Settings whose every value Load accepts: DATA_DIR (an empty one takes
	// the default) is checked when serve starts (server.Preflight).
	anyValue := map[string]bool{"DOMAIN": true, "DATA_DIR": true}
	covered := map[string]bool{}
	for _, tc := range tests {
		covered[tc.key] = true
		t.Run(tc.key, func(t *testing.T) {
			_, err := Load(tc.args, append(append([]string{}, base...), tc.env...), io.Discard)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error\n %v\nwant\n %s", err, tc.want)
			}
		})
	}
	ct := reflect.TypeOf(Config{})
	for i := 0; i < ct.NumField(); i++ {
		if key := ct.Field(i).Tag.Get("env"); key != "-" && !covered[key] && !anyValue[key] {
			t.Errorf("setting %s: no bad value in the table", key)
		}
	}
}

// TestByteSizeUnits: sizes take any case, and every unit is a power of 1024
// (KB as KiB, as the AWS CLI reads its sizes).
func TestByteSizeUnits(t *testing.T) {
	for in, want := range map[string]int64{
		"4MB": 4 << 20, "4mb": 4 << 20, "4MiB": 4 << 20, "4mib": 4 << 20, "4m": 4 << 20, "4194304": 4 << 20,
		"2 KB": 2048, "1GB": 1 << 30, "1gib": 1 << 30, "1T": 1 << 40, "9b": 9,
	} {
		if got, err := ParseByteSize(in); err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"4XB", "MiB", "4 M B", "0x10"} {
		if _, err := ParseByteSize(in); err == nil {
			t.Errorf("ParseByteSize(%q) succeeded", in)
		}
	}
	// The rate settings read sizes with the same parser, with an optional /s.
	c, err := Load(nil, []string{"S3GATE_BANDWIDTH_GLOBAL=4mb/s", "S3GATE_BANDWIDTH_PER_REQUEST=4 MiB/s", "S3GATE_INLINE_MAX=4mb"}, io.Discard)
	if err != nil || c.BandwidthGlobal != 4<<20 || c.BandwidthPerRequest != 4<<20 || c.InlineMax != 4<<20 {
		t.Fatalf("got %d %d %d, %v", c.BandwidthGlobal, c.BandwidthPerRequest, c.InlineMax, err)
	}
}

// TestUnknownVars: an S3GATE_ variable that names no setting is listed, with
// the nearest setting when one is close; known settings are not.
func TestUnknownVars(t *testing.T) {
	c, err := Load(nil, []string{"S3GATE_INLINMAX=1MiB", "S3GATE_FOO=1", "s3gate_max_pins=3", "S3GATE_MAX_PINS=5", "S3GATE_DATABSE_URL=x", "HOME=/root"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []UnknownVar{{"S3GATE_DATABSE_URL", "S3GATE_DATABASE_URL"}, {"S3GATE_FOO", ""}, {"S3GATE_INLINMAX", "S3GATE_INLINE_MAX"},
		{"s3gate_max_pins", "S3GATE_MAX_PINS"}}
	if !reflect.DeepEqual(c.Unknown, want) {
		t.Fatalf("unknown %+v, want %+v", c.Unknown, want)
	}
	if c.MaxPins != 5 {
		t.Fatalf("max pins %d", c.MaxPins)
	}
}
