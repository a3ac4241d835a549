// Package config reads s3gate's settings from the environment (prefix S3GATE_)
// and from command-line flags with the same names (S3GATE_INLINE_MAX is
// -inline-max). Flags win over the environment.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/s3gate/s3gate/throttle"
)

// Prefix is the environment prefix of every setting.
const Prefix = "S3GATE_"

// Large content engines.
const (
	EnginePGLO     = "pglo"
	EnginePGChunks = "pgchunks"
	EngineLocal    = "local"
)

// Config is the gateway's configuration.
type Config struct {
	Addr                string             `env:"ADDR" envDefault:"127.0.0.1:9000" help:"listen address"`
	DatabaseURL         string             `env:"DATABASE_URL" help:"PostgreSQL URL (postgres://...); empty: the embedded default (metadata in DATA_DIR/meta.db)"`
	RootAccess          string             `env:"ROOT_ACCESS_KEY" help:"root access key id (empty: generated once into DATA_DIR/root-credentials)"`
	RootSecret          string             `env:"ROOT_SECRET_KEY" help:"root secret access key"`
	Region              string             `env:"REGION" envDefault:"us-east-1" help:"region the gateway answers for"`
	Domain              string             `env:"DOMAIN" help:"base domain for virtual-host-style addressing (bucket.DOMAIN)"`
	InlineMax           ByteSize           `env:"INLINE_MAX" envDefault:"512KiB" help:"objects up to this size are stored inline (bytea)"`
	LargeEngine         string             `env:"LARGE_ENGINE" help:"large content engine: pgchunks, pglo or local (default pgchunks with a database)"`
	DataDir             string             `env:"DATA_DIR" envDefault:"./data" help:"data directory: local content, the embedded metadata, generated credentials"`
	TLSCertFile         string             `env:"TLS_CERT_FILE" help:"serve HTTPS with this certificate (PEM)"`
	TLSKeyFile          string             `env:"TLS_KEY_FILE" help:"private key of the TLS certificate (PEM)"`
	LogFormat           string             `env:"LOG_FORMAT" envDefault:"text" help:"log format: text or json"`
	LogLevel            string             `env:"LOG_LEVEL" envDefault:"info" help:"log level: debug, info, warn, error"`
	DrainTimeout        Duration           `env:"DRAIN_TIMEOUT" envDefault:"120s" help:"longest graceful drain on shutdown (at most 120s, closing included)"`
	MaxConns            int                `env:"DB_MAX_CONNS" envDefault:"32" help:"largest database pool"`
	BandwidthGlobal     throttle.Bandwidth `env:"BANDWIDTH_GLOBAL" envDefault:"0" help:"cap on all GET streams together, bytes/s (suffixes: 4MiB); 0 = unlimited"`
	BandwidthPerRequest throttle.Bandwidth `env:"BANDWIDTH_PER_REQUEST" envDefault:"0" help:"cap on each GET stream, bytes/s; 0 = unlimited"`
	MaxPins             int                `env:"MAX_PINS" envDefault:"1024" help:"most blobs one instance pins at once (beyond: 503 SlowDown); protects PostgreSQL's lock table"`
	Standby             string             `env:"STANDBY" envDefault:"wait" help:"when another instance owns the database: wait (standby, take over when it frees) or refuse"`
	GCInterval          Duration           `env:"GC_INTERVAL" envDefault:"1m" help:"pause between online GC sweeps; 0 disables online GC"`
	GCGrace             Duration           `env:"GC_GRACE" envDefault:"1m" help:"unreferenced blobs younger than this are left alone (0: the default, 1m)"`
	UploadExpiry        Duration           `env:"UPLOAD_EXPIRY" envDefault:"168h" help:"incomplete multipart uploads older than this are aborted by GC"`
	MetricsAddr         string             `env:"METRICS_ADDR" envDefault:"127.0.0.1:9001" help:"listen address of /metrics, /healthz and /readyz; empty or off disables"`
	// MetricsStatsTTL: the blob statistics scan the blob and object tables,
	// so scrapes reuse them for this long (0: recompute on every scrape).
	MetricsStatsTTL Duration `env:"METRICS_STATS_TTL" envDefault:"10s" help:"how long scrapes reuse the blob statistics (table scans); 0 recomputes every scrape"`
	// MaxClientConns bounds client connections (and so requests and header
	// buffers) at once; beyond it a connection gets 503 SlowDown and is closed.
	MaxClientConns int `env:"MAX_CONNS" envDefault:"1024" help:"most client connections at once (beyond: 503 SlowDown and close)"`
	// DBWait is how long start-up waits for PostgreSQL to accept connections.
	DBWait Duration `env:"DB_WAIT" envDefault:"60s" help:"how long start-up waits for PostgreSQL (backoff; 0: try once)"`
	// ReadIdleTimeout / WriteIdleTimeout bound how long a request body read
	// or a response write may make no progress: a slow client holds nothing
	// for longer (per-read/per-write deadlines, not a whole-request timeout).
	ReadIdleTimeout  Duration `env:"READ_IDLE_TIMEOUT" envDefault:"60s" help:"a request body read without progress for this long ends the request (400 RequestTimeout)"`
	WriteIdleTimeout Duration `env:"WRITE_IDLE_TIMEOUT" envDefault:"60s" help:"a response write the client does not take for this long cuts the connection (a stalled GET releases its pins)"`
}

// MaxDrainTimeout bounds DRAIN_TIMEOUT: the whole shutdown (the HTTP drain
// and what runs after it) ends within it, so a supervisor's kill grace of
// 120 s or more never has to kill the gateway (ADR 004).
const MaxDrainTimeout = 120 * time.Second

// MetricsOff is the METRICS_ADDR value that disables the metrics listener
// (as does an empty value).
const MetricsOff = "off"

// Load parses the environment (environ in os.Environ form) and then args as
// flags. The error names the setting that is missing or bad.
func Load(args []string, environ []string, out io.Writer) (Config, error) {
	var cfg Config
	opts := env.Options{Prefix: Prefix}
	params, err := env.GetFieldParamsWithOptions(&cfg, opts)
	if err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	vars := env.ToMap(environ)
	fs := flag.NewFlagSet("s3gate", flag.ContinueOnError)
	fs.SetOutput(out)
	set := map[string]*string{}
	for _, p := range params {
		name := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(p.Key, Prefix), "_", "-"))
		set[p.Key] = fs.String(name, "", fmt.Sprintf("%s (env %s, default %q)", helpOf(p.Key), p.Key, p.DefaultValue))
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	fs.Visit(func(f *flag.Flag) {
		key := Prefix + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		vars[key] = *set[key]
	})
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	opts.Environment = vars
	if err := env.ParseWithOptions(&cfg, opts); err != nil {
		return cfg, describe(err)
	}
	// env applies the default to an empty value too; an explicitly empty
	// METRICS_ADDR means off.
	if v, ok := vars[Prefix+"METRICS_ADDR"]; ok && strings.TrimSpace(v) == "" {
		cfg.MetricsAddr = ""
	}
	return cfg, cfg.Validate()
}

// FromOS loads the configuration from os.Environ and args.
func FromOS(args []string) (Config, error) { return Load(args, os.Environ(), os.Stderr) }

// Validate checks the settings that depend on each other.
func (c *Config) Validate() error {
	if c.Addr == "" {
		return errors.New(Prefix + "ADDR: must not be empty")
	}
	if (c.RootAccess == "") != (c.RootSecret == "") {
		return errors.New(Prefix + "ROOT_ACCESS_KEY / " + Prefix + "ROOT_SECRET_KEY: set both or neither (neither: a key pair is generated in the data directory)")
	}
	if c.RootAccess != "" && (len(c.RootAccess) < 3 || len(c.RootSecret) < 8) {
		return errors.New(Prefix + "ROOT_SECRET_KEY: the access key needs at least 3 and the secret at least 8 characters")
	}
	if c.InlineMax < 0 || c.InlineMax > 64<<20 {
		return errors.New(Prefix + "INLINE_MAX: must be between 0 and 64MiB")
	}
	switch c.LargeEngine {
	case "":
		if c.DatabaseURL != "" {
			c.LargeEngine = EnginePGChunks
		} else {
			c.LargeEngine = EngineLocal
		}
	case EnginePGLO, EnginePGChunks, EngineLocal:
	default:
		return fmt.Errorf("%sLARGE_ENGINE: %q is not one of pgchunks, pglo, local", Prefix, c.LargeEngine)
	}
	if c.DatabaseURL == "" && c.LargeEngine != EngineLocal {
		return fmt.Errorf("%sLARGE_ENGINE: %q needs %sDATABASE_URL; the embedded default stores content in local files", Prefix, c.LargeEngine, Prefix)
	}
	if c.DataDir == "" && (c.LargeEngine == EngineLocal || c.DatabaseURL == "") {
		return errors.New(Prefix + "DATA_DIR: required for the local engine")
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New(Prefix + "TLS_CERT_FILE / " + Prefix + "TLS_KEY_FILE: set both or neither")
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return fmt.Errorf("%sLOG_FORMAT: %q is not text or json", Prefix, c.LogFormat)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("%sLOG_LEVEL: %q is not debug, info, warn or error", Prefix, c.LogLevel)
	}
	switch c.Standby {
	case "wait", "refuse":
	default:
		return fmt.Errorf("%sSTANDBY: %q is not wait or refuse", Prefix, c.Standby)
	}
	if c.MaxPins < 1 {
		return errors.New(Prefix + "MAX_PINS: at least 1")
	}
	if c.BandwidthGlobal < 0 || c.BandwidthPerRequest < 0 {
		return errors.New(Prefix + "BANDWIDTH_GLOBAL / " + Prefix + "BANDWIDTH_PER_REQUEST: must not be negative")
	}
	if c.MetricsAddr == MetricsOff {
		c.MetricsAddr = ""
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return fmt.Errorf("%sMETRICS_ADDR: %q is not host:port (or off): %w", Prefix, c.MetricsAddr, err)
		}
		if _, port, _ := net.SplitHostPort(c.Addr); c.MetricsAddr == c.Addr && port != "0" {
			return fmt.Errorf("%sMETRICS_ADDR: must differ from %sADDR (%s)", Prefix, Prefix, c.Addr)
		}
	}
	if c.MetricsStatsTTL < 0 {
		return errors.New(Prefix + "METRICS_STATS_TTL: must not be negative")
	}
	if c.MaxConns < 4 {
		return errors.New(Prefix + "DB_MAX_CONNS: at least 4")
	}
	if c.MaxClientConns < 1 {
		return errors.New(Prefix + "MAX_CONNS: at least 1")
	}
	if time.Duration(c.DrainTimeout) > MaxDrainTimeout {
		return fmt.Errorf("%sDRAIN_TIMEOUT: %s is above the %s bound on the whole shutdown", Prefix, time.Duration(c.DrainTimeout), MaxDrainTimeout)
	}
	if c.ReadIdleTimeout <= 0 || c.WriteIdleTimeout <= 0 {
		return errors.New(Prefix + "READ_IDLE_TIMEOUT / " + Prefix + "WRITE_IDLE_TIMEOUT: must be positive (an idle client must not hold the gateway forever)")
	}
	return nil
}

// describe turns the first parse error into one line that names the setting.
func describe(err error) error {
	var pe env.ParseError
	if errors.As(err, &pe) {
		if f, ok := reflect.TypeOf(Config{}).FieldByName(pe.Name); ok {
			return fmt.Errorf("%s%s: %w", Prefix, f.Tag.Get("env"), pe.Err)
		}
	}
	s := strings.TrimPrefix(err.Error(), "env: ")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return errors.New("bad setting: " + s)
}

func helpOf(key string) string {
	t := strings.TrimPrefix(key, Prefix)
	if h, ok := helps[t]; ok {
		return h
	}
	return t
}

// ByteSize is a size in bytes that accepts suffixes: 512KiB, 4MiB, 1GiB, 10MB, 100k.
type ByteSize int64

// UnmarshalText implements encoding.TextUnmarshaler.
func (b *ByteSize) UnmarshalText(text []byte) error {
	v, err := ParseByteSize(string(text))
	if err != nil {
		return err
	}
	*b = ByteSize(v)
	return nil
}

// ParseByteSize parses a size with an optional unit suffix.
func ParseByteSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suf string
		mul int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"k", 1 << 10}, {"K", 1 << 10}, {"m", 1 << 20}, {"M", 1 << 20}, {"g", 1 << 30}, {"G", 1 << 30},
		{"B", 1},
	}
	mul := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suf) {
			s, mul = strings.TrimSpace(strings.TrimSuffix(s, u.suf)), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size (for example 512KiB, 4MiB)", s)
	}
	if n > 0 && mul > (1<<62)/n {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mul, nil
}

// Duration is a time.Duration read from text such as 120s or 2m.
type Duration time.Duration

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(string(text))
	if err != nil || v < 0 {
		return fmt.Errorf("%q is not a duration (for example 120s)", text)
	}
	*d = Duration(v)
	return nil
}

// helps maps a setting name (without prefix) to its help text, read once from
// the struct tags so that the flag help and the fields cannot drift apart.
var helps = func() map[string]string {
	m := map[string]string{}
	t := reflect.TypeOf(Config{})
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		m[f.Tag.Get("env")] = f.Tag.Get("help")
	}
	return m
}()
