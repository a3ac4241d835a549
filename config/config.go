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
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
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
	Addr                string   `env:"ADDR" envDefault:"127.0.0.1:9000" help:"listen address"`
	DatabaseURL         string   `env:"DATABASE_URL" help:"PostgreSQL URL (postgres://...); empty: the embedded default (metadata in DATA_DIR/meta.db)"`
	RootAccess          string   `env:"ROOT_ACCESS_KEY" help:"root access key id (empty: generated once, into the database on PostgreSQL, into DATA_DIR/root-credentials on the embedded default)"`
	RootSecret          string   `env:"ROOT_SECRET_KEY" help:"root secret access key"`
	Region              string   `env:"REGION" envDefault:"us-east-1" help:"region the gateway answers for"`
	Domain              string   `env:"DOMAIN" help:"base domain for virtual-host-style addressing (bucket.DOMAIN)"`
	InlineMax           ByteSize `env:"INLINE_MAX" envDefault:"512KiB" help:"objects up to this size are stored inline (bytea)"`
	LargeEngine         string   `env:"LARGE_ENGINE" help:"large content engine: pgchunks, pglo or local (default pgchunks with a database)"`
	DataDir             string   `env:"DATA_DIR" envDefault:"./data" help:"data directory: local content, the embedded metadata, generated credentials"`
	TLSCertFile         string   `env:"TLS_CERT_FILE" help:"serve HTTPS with this certificate (PEM)"`
	TLSKeyFile          string   `env:"TLS_KEY_FILE" help:"private key of the TLS certificate (PEM)"`
	LogFormat           string   `env:"LOG_FORMAT" envDefault:"text" help:"log format: text or json"`
	LogLevel            string   `env:"LOG_LEVEL" envDefault:"info" help:"log level: debug, info, warn, error"`
	DrainTimeout        Duration `env:"DRAIN_TIMEOUT" envDefault:"120s" help:"longest graceful drain on shutdown (at most 120s, closing included)"`
	MaxConns            int      `env:"DB_MAX_CONNS" envDefault:"32" help:"largest database pool"`
	ReadLanes           int      `env:"DB_READ_LANES" envDefault:"4" help:"most batches of object reads in flight at once: reads wait for the one in flight and go out together; one queued 2ms opens another lane; 0 sends every read alone"`
	BandwidthGlobal     ByteRate `env:"BANDWIDTH_GLOBAL" envDefault:"0" help:"cap on all GET streams together, bytes/s (suffixes: 4MiB); 0 = unlimited"`
	BandwidthPerRequest ByteRate `env:"BANDWIDTH_PER_REQUEST" envDefault:"0" help:"cap on each GET stream, bytes/s; 0 = unlimited"`
	MaxPins             int      `env:"MAX_PINS" envDefault:"1024" help:"most blobs one instance pins at once (beyond: 503 SlowDown); protects PostgreSQL's lock table"`
	Standby             string   `env:"STANDBY" envDefault:"wait" help:"when another instance owns the database: wait (standby, take over when it frees) or refuse"`
	GCInterval          Duration `env:"GC_INTERVAL" envDefault:"1m" help:"pause between online GC sweeps; 0 disables online GC"`
	GCGrace             Duration `env:"GC_GRACE" envDefault:"1m" help:"unreferenced blobs younger than this are left alone (0: the default, 1m)"`
	UploadExpiry        Duration `env:"UPLOAD_EXPIRY" envDefault:"168h" help:"incomplete multipart uploads older than this are aborted by GC"`
	MetricsAddr         string   `env:"METRICS_ADDR" envDefault:"127.0.0.1:9001" help:"listen address of /metrics, /healthz and /readyz; empty or off disables"`
	// Lifecycle rules (docs/adr/015-lifecycle.md): one instance of a fleet
	// applies them at a time, under the lifecycle lease.
	LifecycleInterval Duration `env:"LIFECYCLE_INTERVAL" envDefault:"1h" help:"pause between runs of the bucket lifecycle rules; 0 disables them"`
	LifecycleDay      Duration `env:"LIFECYCLE_DAY" envDefault:"24h" help:"length of a lifecycle day (Days, NoncurrentDays, DaysAfterInitiation and their rounding); shorter for tests and demos"`
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
	// BlockPublicAccess is the Block Public Access of every bucket that never
	// had its own set through the API: all four flags (as AWS sets them on
	// new buckets since 2023), or none.
	BlockPublicAccess bool `env:"BLOCK_PUBLIC_ACCESS" envDefault:"true" help:"Block Public Access of buckets that never had their own (PutPublicAccessBlock): true sets all four flags, false none"`

	// Fleet mode (docs/adr/009-fleet-mode.md): every instance on the
	// database serves reads and writes; none takes the writer claim.
	Fleet bool `env:"FLEET" envDefault:"false" help:"fleet mode: several instances serve one PostgreSQL database at once (no writer claim, no standby); needs large content in PostgreSQL, or -shared-media with the local engine"`
	// SharedMedia declares DATA_DIR the same filesystem on every instance;
	// fleet mode proves it at start-up with a marker probe. Without fleet
	// mode it changes nothing (one instance owns its media anyway).
	SharedMedia bool `env:"SHARED_MEDIA" envDefault:"false" help:"DATA_DIR is one filesystem shared by every instance (NFS, CephFS): lets a fleet use the local engine; proven at start-up by a marker probe; no effect without -fleet"`
	// InstanceTTL: a fleet instance heartbeats its registration every
	// TTL/3; one whose last heartbeat is older than TTL counts as gone.
	InstanceTTL Duration `env:"INSTANCE_TTL" envDefault:"30s" help:"fleet mode: an instance whose heartbeat (sent every TTL/3) is older than this counts as gone and is reaped from the registry"`
	// ReadOnly makes the instance a read replica (ADR 013). It is also on by
	// itself when the database is a hot standby (pg_is_in_recovery()).
	ReadOnly bool `env:"READ_ONLY" envDefault:"false" help:"serve reads only (a read replica): writes are refused, no writer claim, GC or migrations; on by itself on a hot standby"`

	// PinMode: how GETs protect what they stream (docs/adr/010-row-pins.md).
	// Rows work through a transaction-pooling proxy in front of the pool.
	PinMode string `env:"PIN_MODE" envDefault:"session" help:"how GETs pin content on PostgreSQL: session (shared advisory locks on a dedicated session) or rows (pin rows renewed every PIN_TTL/3; the pool may then go through pgbouncer in transaction mode)"`
	// PinTTL is the expiry of a pin row.
	PinTTL Duration `env:"PIN_TTL" envDefault:"30s" help:"expiry of a pin row (PIN_MODE=rows), renewed every third of it; at least 300ms"`
	// DirectDatabaseURL is for the sessions that hold advisory locks (the
	// writer claim, the pin session, migrations): never a transaction pooler.
	DirectDatabaseURL string `env:"DIRECT_DATABASE_URL" help:"PostgreSQL URL without a transaction-pooling proxy, for the sessions that hold advisory locks (writer claim, pin session, migrations); empty: DATABASE_URL"`
	// MetadataCache caches bucket configurations and access keys on
	// PostgreSQL, invalidated by NOTIFY (docs/adr/018-metadata-cache.md).
	MetadataCache bool `env:"METADATA_CACHE" envDefault:"true" help:"PostgreSQL: cache bucket configurations and access keys, invalidated at each commit through LISTEN/NOTIFY on a dedicated session of DIRECT_DATABASE_URL (off on a read replica); false: read them on every request"`

	// Unknown are the S3GATE_ variables of the environment that name no
	// setting (a typo is warned about at start-up, not silently ignored).
	Unknown []UnknownVar `env:"-"`
}

// MaxDrainTimeout bounds DRAIN_TIMEOUT: the whole shutdown (the HTTP drain
// and what runs after it) ends within it, so a supervisor's kill grace of
// 120 s or more never has to kill the gateway (ADR 004).
const MaxDrainTimeout = 120 * time.Second

// MetricsOff is the METRICS_ADDR value that disables the metrics listener
// (as does an empty value).
const MetricsOff = "off"

// Load parses the environment (environ in os.Environ form) and then args as
// flags. The error names the setting that is missing or bad (a SettingError),
// or the bad flag in one line. With -h or -help it writes the settings' flag
// listing to out and returns flag.ErrHelp.
func Load(args []string, environ []string, out io.Writer) (Config, error) {
	var cfg Config
	opts := env.Options{Prefix: Prefix}
	params, err := env.GetFieldParamsWithOptions(&cfg, opts)
	if err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	vars := env.ToMap(environ)
	fs := flag.NewFlagSet("s3gate", flag.ContinueOnError)
	// A bad flag is one line in the caller's error, not the flag package's
	// dump of every setting (each command's --help lists them).
	fs.Usage = func() {}
	set := map[string]*string{}
	for _, p := range params {
		usage := fmt.Sprintf("%s (env %s, default %q)", helpOf(p.Key), p.Key, p.DefaultValue)
		if IsBoolFlag(flagName(p.OwnKey)) { // -fleet alone means -fleet=true
			v := new(string)
			fs.Var((*boolFlag)(v), flagName(p.OwnKey), usage)
			set[p.Key] = v
			continue
		}
		set[p.Key] = fs.String(flagName(p.OwnKey), "", usage)
	}
	fs.SetOutput(io.Discard) // the error is returned, not printed
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(out)
			fs.PrintDefaults()
			return cfg, err
		}
		return cfg, fmt.Errorf("%w (--help lists the settings)", err)
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
		return cfg, describe(err, vars)
	}
	// env applies the default to an empty value too; an explicitly empty
	// METRICS_ADDR means off.
	if v, ok := vars[Prefix+"METRICS_ADDR"]; ok && strings.TrimSpace(v) == "" {
		cfg.MetricsAddr = ""
	}
	cfg.Unknown = unknownVars(environ)
	return cfg, cfg.Validate()
}

// FromOS loads the configuration from os.Environ and args.
func FromOS(args []string) (Config, error) { return Load(args, os.Environ(), os.Stderr) }

// Validate checks each setting's range and the settings that depend on each
// other. Every error is a SettingError.
func (c *Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return Errorf("ADDR", "%q is not host:port (for example 127.0.0.1:9000 or :9000)", c.Addr)
	}
	if (c.RootAccess == "") != (c.RootSecret == "") {
		return &SettingError{Keys: []string{"ROOT_ACCESS_KEY", "ROOT_SECRET_KEY"},
			Err: errors.New("set both or neither (neither: a key pair is generated in the data directory)")}
	}
	// Never echo a key: the message says only what is wrong.
	if c.RootAccess != "" && len(c.RootAccess) < 3 {
		return Errorf("ROOT_ACCESS_KEY", "too short: at least 3 characters")
	}
	if c.RootSecret != "" && len(c.RootSecret) < 8 {
		return Errorf("ROOT_SECRET_KEY", "too short: at least 8 characters")
	}
	if strings.ContainsAny(c.Region, "/ \t") {
		return Errorf("REGION", "%q is not a region name (a SigV4 scope part, such as us-east-1)", c.Region)
	}
	if c.DatabaseURL != "" {
		if err := checkDatabaseURL(c.DatabaseURL); err != nil {
			return Errorf("DATABASE_URL", "%w", err)
		}
	}
	if c.InlineMax < 0 || c.InlineMax > 64<<20 {
		return Errorf("INLINE_MAX", "%d bytes is not between 0 and 64MiB", c.InlineMax)
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
		return Errorf("LARGE_ENGINE", "%q is not one of pgchunks, pglo, local", c.LargeEngine)
	}
	if c.DatabaseURL == "" && c.LargeEngine != EngineLocal {
		return Errorf("LARGE_ENGINE", "%q needs %s; the embedded default stores content in local files", c.LargeEngine, Name("DATABASE_URL"))
	}
	if c.DataDir == "" && (c.LargeEngine == EngineLocal || c.DatabaseURL == "") {
		return Errorf("DATA_DIR", "must not be empty with the local engine or the embedded default")
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return &SettingError{Keys: []string{"TLS_CERT_FILE", "TLS_KEY_FILE"}, Err: errors.New("set both or neither")}
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return Errorf("LOG_FORMAT", "%q is not text or json", c.LogFormat)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return Errorf("LOG_LEVEL", "%q is not debug, info, warn or error", c.LogLevel)
	}
	if c.ReadOnly && c.DatabaseURL == "" {
		return Errorf("READ_ONLY", "needs %s: a read replica serves a PostgreSQL database", Name("DATABASE_URL"))
	}
	switch c.Standby {
	case "wait", "refuse":
	default:
		return Errorf("STANDBY", "%q is not wait or refuse", c.Standby)
	}
	if c.MaxPins < 1 {
		return Errorf("MAX_PINS", "%d is too small: at least 1", c.MaxPins)
	}
	if c.BandwidthGlobal < 0 {
		return Errorf("BANDWIDTH_GLOBAL", "%d must not be negative", c.BandwidthGlobal)
	}
	if c.BandwidthPerRequest < 0 {
		return Errorf("BANDWIDTH_PER_REQUEST", "%d must not be negative", c.BandwidthPerRequest)
	}
	if c.MetricsAddr == MetricsOff {
		c.MetricsAddr = ""
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return Errorf("METRICS_ADDR", "%q is not host:port (or off)", c.MetricsAddr)
		}
		if _, port, _ := net.SplitHostPort(c.Addr); c.MetricsAddr == c.Addr && port != "0" {
			return Errorf("METRICS_ADDR", "must differ from %s (%s)", Name("ADDR"), c.Addr)
		}
	}
	if c.MaxConns < 4 {
		return Errorf("DB_MAX_CONNS", "%d is too small: at least 4", c.MaxConns)
	}
	if c.ReadLanes < 0 || c.ReadLanes >= c.MaxConns {
		return Errorf("DB_READ_LANES", "%d is out of range: 0 (off) to %d, below %s", c.ReadLanes, c.MaxConns-1, Name("DB_MAX_CONNS"))
	}
	if c.MaxClientConns < 1 {
		return Errorf("MAX_CONNS", "%d is too small: at least 1", c.MaxClientConns)
	}
	if time.Duration(c.DrainTimeout) > MaxDrainTimeout {
		return Errorf("DRAIN_TIMEOUT", "%s is above the %s bound on the whole shutdown", time.Duration(c.DrainTimeout), MaxDrainTimeout)
	}
	if c.MetricsStatsTTL < 0 {
		return Errorf("METRICS_STATS_TTL", "must not be negative")
	}
	// An idle client must not hold the gateway forever.
	if c.ReadIdleTimeout <= 0 {
		return Errorf("READ_IDLE_TIMEOUT", "%s is not positive", time.Duration(c.ReadIdleTimeout))
	}
	if c.WriteIdleTimeout <= 0 {
		return Errorf("WRITE_IDLE_TIMEOUT", "%s is not positive", time.Duration(c.WriteIdleTimeout))
	}
	// The heartbeat runs every TTL/3 on a session whose statements may take
	// 2 s: below 3 s a healthy instance could look gone.
	if ttl := time.Duration(c.InstanceTTL); ttl < MinInstanceTTL || ttl > MaxInstanceTTL {
		return Errorf("INSTANCE_TTL", "%s is not between %s and %s", ttl, MinInstanceTTL, MaxInstanceTTL)
	}
	if c.LifecycleDay < Duration(time.Second) {
		return Errorf("LIFECYCLE_DAY", "%s is under the minimum 1s", time.Duration(c.LifecycleDay))
	}
	return c.validatePins()
}

// Pin modes (PIN_MODE).
const (
	PinModeSession = "session"
	PinModeRows    = "rows"
)

// MinPinTTL bounds PIN_TTL: a renewal every third of it must fit a round trip
// on a loaded database (fleet.MinPinTTL).
const MinPinTTL = 300 * time.Millisecond

func (c *Config) validatePins() error {
	switch c.PinMode {
	case PinModeSession:
	case PinModeRows:
		if c.DatabaseURL == "" {
			return Errorf("PIN_MODE", "rows needs %s: the embedded default pins in process", Name("DATABASE_URL"))
		}
	default:
		return Errorf("PIN_MODE", "%q is not session or rows", c.PinMode)
	}
	if time.Duration(c.PinTTL) < MinPinTTL {
		return Errorf("PIN_TTL", "%s is under the minimum %s", time.Duration(c.PinTTL), MinPinTTL)
	}
	if c.DirectDatabaseURL != "" {
		if c.DatabaseURL == "" {
			return Errorf("DIRECT_DATABASE_URL", "needs %s", Name("DATABASE_URL"))
		}
		if err := checkDatabaseURL(c.DirectDatabaseURL); err != nil {
			return Errorf("DIRECT_DATABASE_URL", "%w", err)
		}
	}
	return nil
}

// Bounds of INSTANCE_TTL.
const (
	MinInstanceTTL = 3 * time.Second
	MaxInstanceTTL = 10 * time.Minute
)

// boolFlag is the flag of a boolean setting: "-fleet" alone sets it to true,
// "-fleet=false" to false; the value is parsed with the environment's.
type boolFlag string

func (b *boolFlag) String() string     { return string(*b) }
func (b *boolFlag) Set(v string) error { *b = boolFlag(v); return nil }
func (b *boolFlag) IsBoolFlag() bool   { return true }

// IsBoolFlag reports whether the setting flag name (such as "fleet") is
// boolean: it may stand alone, without a value.
func IsBoolFlag(name string) bool { return boolFlags[name] }

// DirectURL is the URL of the sessions that must not go through a
// transaction-pooling proxy: DIRECT_DATABASE_URL, else DATABASE_URL.
func (c Config) DirectURL() string {
	if c.DirectDatabaseURL != "" {
		return c.DirectDatabaseURL
	}
	return c.DatabaseURL
}

// checkDatabaseURL checks the form of DATABASE_URL without echoing it (it
// may hold a password; url.Parse's error would quote it).
func checkDatabaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return errors.New("not a URL of the form postgres://user:password@host:5432/database")
	}
	return nil
}

// SettingError is a bad or missing setting, in the one form every setting's
// error takes: the settings it names (environment variable and flag), then
// what is wrong and the form expected, for example
// `S3GATE_MAX_PINS (-max-pins): "none" is not a whole number`.
type SettingError struct {
	Keys []string // setting names without the prefix: MAX_PINS
	Err  error
}

func (e *SettingError) Error() string {
	names := make([]string, len(e.Keys))
	for i, k := range e.Keys {
		names[i] = Name(k)
	}
	return strings.Join(names, " / ") + ": " + e.Err.Error()
}

func (e *SettingError) Unwrap() error { return e.Err }

// Errorf returns the SettingError of one setting (key without the prefix,
// such as MAX_PINS); format and a are as in fmt.Errorf.
func Errorf(key, format string, a ...any) error {
	return &SettingError{Keys: []string{key}, Err: fmt.Errorf(format, a...)}
}

// Name is how errors name a setting (key without the prefix): its
// environment variable and its flag, as in "S3GATE_MAX_PINS (-max-pins)".
func Name(key string) string { return Prefix + key + " (-" + flagName(key) + ")" }

func flagName(key string) string { return strings.ToLower(strings.ReplaceAll(key, "_", "-")) }

// describe turns the first parse error into a SettingError naming the
// setting and the form it expects.
func describe(err error, vars map[string]string) error {
	var pe env.ParseError
	if errors.As(err, &pe) {
		if f, ok := reflect.TypeOf(Config{}).FieldByName(pe.Name); ok {
			key := f.Tag.Get("env")
			// Plain int settings get strconv's error; the others (sizes,
			// durations) return their own, which state the form.
			switch f.Type.Kind() {
			case reflect.Int:
				return Errorf(key, "%q is not a whole number", vars[Prefix+key])
			case reflect.Bool:
				return Errorf(key, "%q is not true or false", vars[Prefix+key])
			}
			return &SettingError{Keys: []string{key}, Err: pe.Err}
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

// ByteSize is a size in bytes: a whole number of bytes, or one with a unit
// (ParseByteSize).
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

// sizeUnits are the units of ParseByteSize, matched without regard to case.
// Every unit is a power of 1024, KB as KiB: as the AWS CLI reads its
// multipart sizes and as S3's own limits are written (a "5 GB" part is 5 GiB),
// so that a size copied from either means the same here.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
	"m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
	"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
	"t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
}

// sizeForm is the expected form that a bad size's error states.
const sizeForm = "bytes, or a whole number with a unit such as 512KiB, 4MB or 1g (any case; KB = KiB = 1024 bytes)"

// ParseByteSize parses a size: a whole number of bytes, or a whole number
// with a unit B, K/KB/KiB, M/MB/MiB, G/GB/GiB or T/TB/TiB in any case, every
// unit a power of 1024 (4MB = 4mb = 4MiB = 4194304).
func ParseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	mul, ok := sizeUnits[strings.ToLower(strings.TrimSpace(t[i:]))]
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if !ok || err != nil {
		return 0, fmt.Errorf("%q is not a size: %s", s, sizeForm)
	}
	if n > 0 && mul > (1<<62)/n {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mul, nil
}

// ByteRate is a rate in bytes per second: a size (ParseByteSize), optionally
// followed by "/s".
type ByteRate int64

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *ByteRate) UnmarshalText(text []byte) error {
	s := string(text)
	v, err := ParseByteSize(strings.TrimSuffix(strings.TrimSpace(s), "/s"))
	if err != nil {
		return fmt.Errorf("%q is not a rate: %s, per second (an optional /s)", s, sizeForm)
	}
	*r = ByteRate(v)
	return nil
}

// Duration is a time.Duration read from text such as 120s or 2m.
type Duration time.Duration

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(string(text))
	if err != nil || v < 0 {
		return fmt.Errorf("%q is not a duration (a number with a unit: 500ms, 120s, 2m, 1h30m)", text)
	}
	*d = Duration(v)
	return nil
}

// boolFlags holds the flag names of the boolean settings.
var boolFlags = func() map[string]bool {
	m := map[string]bool{}
	t := reflect.TypeOf(Config{})
	for i := 0; i < t.NumField(); i++ {
		if key := t.Field(i).Tag.Get("env"); key != "-" && t.Field(i).Type.Kind() == reflect.Bool {
			m[flagName(key)] = true
		}
	}
	return m
}()

// helps maps a setting name (without prefix) to its help text, read once from
// the struct tags so that the flag help and the fields cannot drift apart.
var helps = func() map[string]string {
	m := map[string]string{}
	t := reflect.TypeOf(Config{})
	for i := 0; i < t.NumField(); i++ {
		if key := t.Field(i).Tag.Get("env"); key != "-" {
			m[key] = t.Field(i).Tag.Get("help")
		}
	}
	return m
}()
