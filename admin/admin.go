// Package admin implements `s3gate admin`: operations on a gateway's metadata
// store that need no restart: access-key management and the list of a
// fleet's instances:
//
//	s3gate admin key create [-buckets a,b] [-read-only] [-access-key ID] [-secret-stdin | -secret-file F | -secret S] [settings]
//	s3gate admin key list   [-json] [settings]
//	s3gate admin key delete ID [settings]
//	s3gate admin instances  [-json] [settings]
//
// It reads the same configuration as `s3gate serve` (S3GATE_* variables and
// the same flags) and opens the same store directly: the PostgreSQL database
// of S3GATE_DATABASE_URL, or without one the embedded store in
// S3GATE_DATA_DIR (SQLite in WAL mode lets this run beside a live gateway).
// The gateway looks keys up on every request, so changes apply at once.
package admin

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/gc"
	"github.com/s3gate/s3gate/internal/randid"
	"github.com/s3gate/s3gate/policy"
	"github.com/s3gate/s3gate/server"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/embedded"
	"github.com/s3gate/s3gate/store/metacache"
	"github.com/s3gate/s3gate/store/pg"
)

// Exit codes of Run.
const (
	exitOK    = 0
	exitFail  = 1 // the operation failed
	exitUsage = 2 // bad command line or configuration
)

const usage = `usage: s3gate admin key create|list|delete [flags] [settings]
       s3gate admin instances [-json] [settings]
       s3gate admin bucket info NAME [-json] [settings]

Manages the access keys in the gateway's store; changes apply at once, without a restart.
Lists the instances of a fleet (S3GATE_FLEET=true) registered in the database.
Shows a bucket's versioning, Object Lock and lifecycle state and what it holds.

Commands:
  s3gate admin key create [-buckets a,b] [-read-only] [-policy-file F | -policy JSON] [-access-key ID] [-secret-stdin | -secret-file F | -secret S] [settings]
  s3gate admin key list   [-json] [settings]
  s3gate admin key delete ID [settings]
  s3gate admin instances  [-json] [settings]
  s3gate admin bucket info NAME [-json] [settings]

Settings and S3GATE_* variables are those of "s3gate serve" (-database-url, -data-dir, ...):
the command opens the same store. "s3gate admin key <command> --help" shows each command's flags.

Examples:
  s3gate admin key create -buckets photos -read-only
  s3gate admin key create -policy-file uploader.json
  s3gate admin key list -data-dir /var/lib/s3gate
  s3gate help admin key create
`

// keyHelp is the help page of each key command; fs holds its own flags.
func keyHelp(sub string, fs *flag.FlagSet) gc.Help {
	h := gc.Help{Flags: fs, Settings: []string{"database-url", "data-dir"}, Shared: true}
	switch sub {
	case "create":
		h.Usage = "admin key create [-buckets a,b] [-read-only] [-policy-file F | -policy JSON] [-access-key ID] [-secret-stdin | -secret-file F | -secret S] [settings]"
		h.Purpose = "Creates an access key (id and secret generated unless given) and prints it; a generated secret is shown only this once. A policy (an IAM-style document without Principal) limits the key further; -buckets and -read-only bound it."
		h.Examples = []string{
			"s3gate admin key create -buckets photos,backups -read-only",
			`s3gate admin key create -policy '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:PutObject","Resource":"arn:aws:s3:::inbox/uploads/*"}]}'`,
			"s3gate admin key create -access-key CI-UPLOADER -data-dir /var/lib/s3gate",
		}
	case "list":
		h.Usage = "admin key list [-json] [settings]"
		h.Purpose = "Lists the access keys in the store (never their secrets)."
		h.Examples = []string{"s3gate admin key list", "S3GATE_DATABASE_URL=postgres://... s3gate admin key list"}
	case "delete":
		h.Usage = "admin key delete ID [settings]"
		h.Purpose = "Deletes the access key ID; requests signed with it are refused at once."
		h.Examples = []string{"s3gate admin key delete S3KABCDEFGHIJKLMNOP"}
	}
	return h
}

// Run runs `s3gate admin` with args (the words after "admin") and returns
// the process exit code: 0 on success, 1 when the operation failed, 2 for a
// bad command line or configuration. Help goes to stdout.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return run(ctx, args, os.Environ(), os.Stdin, stdout, stderr)
}

func run(ctx context.Context, args, environ []string, stdin io.Reader, stdout, stderr io.Writer) int {
	switch {
	case len(args) > 0 && isHelp(args[0]), len(args) > 1 && args[0] == "key" && isHelp(args[1]):
		fmt.Fprint(stdout, usage)
		return exitOK
	case len(args) > 0 && args[0] == "instances":
		return instances(ctx, args[1:], environ, stdout, stderr)
	case len(args) > 0 && args[0] == "bucket":
		return bucket(ctx, args[1:], environ, stdout, stderr)
	case len(args) > 0 && args[0] != "key":
		fmt.Fprintf(stderr, "s3gate admin: unknown command %q\n%s", args[0], usage)
		return exitUsage
	case len(args) < 2:
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	sub := args[1]
	keyArgs, cfgArgs, pos := splitArgs(args[2:])
	fs := flag.NewFlagSet("s3gate admin key "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		c        createOpts
		jsonList bool
	)
	switch sub {
	case "create":
		fs.StringVar(&c.buckets, "buckets", "", "comma-separated buckets the key may use (default: all)")
		fs.BoolVar(&c.readOnly, "read-only", false, "allow only reads (Get*, Head*, List*)")
		fs.StringVar(&c.id, "access-key", "", "access key id (default: generated)")
		fs.StringVar(&c.secret, "secret", "", "secret access key (default: generated; visible to other users in ps: prefer -secret-stdin or -secret-file)")
		fs.BoolVar(&c.secretStdin, "secret-stdin", false, "read the secret access key from standard input (one line)")
		fs.StringVar(&c.secretFile, "secret-file", "", "read the secret access key from this file (one line)")
		fs.StringVar(&c.policy, "policy", "", "the key's access policy: a JSON policy document without Principal")
		fs.StringVar(&c.policyFile, "policy-file", "", "read the key's access policy from this file")
	case "list":
		fs.BoolVar(&jsonList, "json", false, "print JSON: the root key's id and origin, and every key (never a secret)")
	case "delete":
	default:
		fmt.Fprintf(stderr, "s3gate admin key: unknown command %q\n%s", sub, usage)
		return exitUsage
	}
	if slices.ContainsFunc(args[2:], isHelpFlag) {
		keyHelp(sub, fs).Write(stdout)
		return exitOK
	}
	if err := fs.Parse(keyArgs); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	cfg, code, done := loadConfig(cfgArgs, environ, stderr)
	if done {
		return code
	}
	wantPos := 0
	if sub == "delete" {
		wantPos = 1
	}
	if len(pos) != wantPos {
		fmt.Fprintf(stderr, "s3gate admin key %s: want %d argument(s), got %q\n%s", sub, wantPos, pos, usage)
		return exitUsage
	}
	if sub == "create" {
		if err := c.readSecret(stdin); err != nil {
			fmt.Fprintf(stderr, "s3gate admin key create: %v\n", err)
			return exitUsage
		}
		if err := c.check(); err != nil {
			fmt.Fprintf(stderr, "s3gate admin key create: %v\n", err)
			return exitUsage
		}
		if err := c.readPolicy(); err != nil {
			fmt.Fprintf(stderr, "s3gate admin key create: %v\n", err)
			return exitUsage
		}
	}

	keys, closeStore, err := openStore(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "s3gate admin: %v\n", err)
		return exitFail
	}
	defer closeStore()
	rks, _ := keys.(store.RootKeyStore)
	root, hasRoot, err := server.FindRootKey(ctx, cfg, rks)
	if err != nil {
		fmt.Fprintf(stderr, "s3gate admin: %v\n", err)
		return exitFail
	}
	// The root key, from the environment or generated, is never in the
	// store: the gateway would not consult a stored key of the same id.
	target := c.id
	if sub == "delete" {
		target = pos[0]
	}
	if hasRoot && sub != "list" && target == root.AccessKey {
		fmt.Fprintf(stderr, "s3gate admin key %s: %s is the root key's id (%s), not a key of the store\n", sub, target, root.Origin)
		return exitUsage
	}

	switch sub {
	case "create":
		err = create(ctx, keys, c, stdout)
	case "list":
		err = list(ctx, keys, root, jsonList, stdout)
	default:
		err = keys.DeleteKey(ctx, pos[0])
		if err == nil {
			fmt.Fprintf(stdout, "deleted access key %s\n", pos[0])
			confirmDelete(ctx, cfg, pos[0], stderr)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "s3gate admin key %s: %v\n", sub, describe(err))
		return exitFail
	}
	return exitOK
}

// confirmTimeout bounds how long key delete waits for the running gateways.
const confirmTimeout = 5 * time.Second

// confirmDelete waits until every gateway running on the database has
// dropped the deleted key from its cache (store/metacache), so that the key
// is refused everywhere when the command returns; it warns about gateways
// that did not confirm in time (they drop it when they hear the commit).
func confirmDelete(ctx context.Context, cfg config.Config, id string, stderr io.Writer) {
	if cfg.DatabaseURL == "" {
		return // the embedded engine caches nothing
	}
	ctx, cancel := context.WithTimeout(ctx, confirmTimeout)
	defer cancel()
	ok, of, err := metacache.Confirm(ctx, cfg.DirectURL())
	if err != nil {
		fmt.Fprintf(stderr, "s3gate admin key delete: %s is deleted; could not confirm that running gateways dropped it: %v\n", id, err)
	} else if ok < of {
		fmt.Fprintf(stderr, "s3gate admin key delete: %s is deleted; %d of %d running gateways did not confirm within %v (they refuse it once they hear the commit)\n", id, of-ok, of, confirmTimeout)
	}
}

// loadConfig reads the settings shared with serve; done means the command
// ends now with code (help was shown, or a setting is bad).
func loadConfig(args, environ []string, stderr io.Writer) (cfg config.Config, code int, done bool) {
	cfg, err := config.Load(args, environ, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return cfg, exitOK, true
	}
	if err != nil {
		fmt.Fprintf(stderr, "s3gate admin: %v\n", err)
		return cfg, exitUsage, true
	}
	return cfg, exitOK, false
}

func isHelp(a string) bool { return a == "help" || isHelpFlag(a) }

func isHelpFlag(a string) bool { return a == "-h" || a == "--h" || a == "-help" || a == "--help" }

// keyFlags are the flags of `admin key create` and `list`, with whether each
// is boolean. Every other flag belongs to the configuration (config.Load),
// whose flags take a value unless config.IsBoolFlag.
var keyFlags = map[string]bool{"buckets": false, "read-only": true, "access-key": false, "secret": false,
	"secret-stdin": true, "secret-file": false, "json": true, "policy": false, "policy-file": false}

// splitArgs separates the key command's own flags, the configuration flags
// (shared with serve) and positional arguments, in any order.
func splitArgs(args []string) (keyArgs, cfgArgs, pos []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		isBool, isKey := keyFlags[name]
		isBool = isBool || (!isKey && config.IsBoolFlag(name)) // -fleet stands alone
		dst := &cfgArgs
		if isKey {
			dst = &keyArgs
		}
		*dst = append(*dst, a)
		if hasValue || isBool || name == "h" || name == "help" {
			continue
		}
		if i+1 < len(args) {
			i++
			*dst = append(*dst, args[i])
		}
	}
	return keyArgs, cfgArgs, pos
}

// createOpts are the flags of `admin key create`.
type createOpts struct {
	buckets     string
	readOnly    bool
	id          string
	secret      string
	secretStdin bool
	secretFile  string
	list        []string // parsed buckets
	policy      string
	policyFile  string
}

// readPolicy reads -policy or -policy-file and validates the document as
// the gateway will evaluate it.
func (c *createOpts) readPolicy() error {
	src := "-policy"
	switch {
	case c.policy != "" && c.policyFile != "":
		return errors.New("-policy and -policy-file exclude each other")
	case c.policyFile != "":
		src = "-policy-file " + c.policyFile
		b, err := os.ReadFile(c.policyFile)
		if err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
		c.policy = string(b)
	case c.policy == "":
		return nil
	}
	if len(c.policy) > policy.MaxBucketPolicy {
		return fmt.Errorf("%s: the document has %d bytes, at most %d", src, len(c.policy), policy.MaxBucketPolicy)
	}
	if _, err := policy.Parse([]byte(c.policy), policy.Identity, ""); err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	return nil
}

// maxSecretInput bounds what -secret-stdin and -secret-file read: a secret is
// at most 128 characters.
const maxSecretInput = 4096

// readSecret fills c.secret from standard input or the -secret-file, without
// the line's end.
func (c *createOpts) readSecret(stdin io.Reader) error {
	given := 0
	for _, set := range []bool{c.secret != "", c.secretStdin, c.secretFile != ""} {
		if set {
			given++
		}
	}
	if given > 1 {
		return errors.New("-secret, -secret-stdin and -secret-file exclude each other")
	}
	var (
		src  = "-secret-stdin"
		data []byte
		err  error
	)
	switch {
	case c.secretStdin:
		data, err = io.ReadAll(io.LimitReader(stdin, maxSecretInput))
	case c.secretFile != "":
		src = "-secret-file " + c.secretFile
		var f *os.File
		if f, err = os.Open(c.secretFile); err == nil {
			data, err = io.ReadAll(io.LimitReader(f, maxSecretInput))
			_ = f.Close() // read-only
		}
	default:
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	line, rest, _ := strings.Cut(string(data), "\n")
	if c.secret = strings.TrimSuffix(line, "\r"); c.secret == "" || strings.TrimSpace(rest) != "" {
		return fmt.Errorf("%s: want the secret alone on one line", src)
	}
	return nil
}

var (
	// Access key ids travel in SigV4 credential scopes ("ID/date/...") and
	// SigV2 headers ("AWS ID:sig"): no '/', ':' or spaces.
	keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{3,128}$`)
	// Secrets: printable ASCII without spaces, so they paste into shells and
	// configuration files unharmed.
	secretPattern = regexp.MustCompile(`^[!-~]{8,128}$`)
)

func (c *createOpts) check() error {
	if c.id != "" && !keyIDPattern.MatchString(c.id) {
		return errors.New("-access-key: 3 to 128 characters of A-Z, a-z, 0-9, '.', '_', '-'")
	}
	if c.secret != "" && !secretPattern.MatchString(c.secret) {
		return errors.New("-secret: 8 to 128 printable ASCII characters without spaces")
	}
	for _, b := range strings.Split(c.buckets, ",") {
		b = strings.TrimSpace(b)
		if b == "" || slices.Contains(c.list, b) {
			continue
		}
		if err := store.ValidBucketName(b); err != nil {
			return fmt.Errorf("-buckets: %q: %w", b, err)
		}
		c.list = append(c.list, b)
	}
	return nil
}

// adminEngine is what the admin commands read and change in the metadata engine
// serve would use.
type adminEngine interface {
	store.KeyStore
	HeadBucket(ctx context.Context, name string) (store.Bucket, error)
	store.BucketConfigStore
	store.UsageStore
}

// openStore opens the metadata engine that serve would use, beside a
// running gateway: on the embedded default without its content side, on
// PostgreSQL without media (pgchunks needs none, so the command never
// touches the data directory).
func openStore(ctx context.Context, cfg config.Config) (adminEngine, func(), error) {
	if cfg.DatabaseURL == "" {
		e, err := embedded.Open(ctx, embedded.Config{Dir: cfg.DataDir, Region: cfg.Region, KeysOnly: true})
		if err != nil {
			return nil, nil, fmt.Errorf("open embedded store in %sDATA_DIR: %w", config.Prefix, err)
		}
		return e, func() { _ = e.Close() }, nil // nothing is pending once the command is done
	}
	e, err := pg.Open(ctx, pg.Config{DatabaseURL: cfg.DatabaseURL, Large: pg.LargePGChunks, Region: cfg.Region})
	if err != nil {
		return nil, nil, fmt.Errorf("open database (%sDATABASE_URL): %w", config.Prefix, err)
	}
	return e, e.Close, nil
}

func create(ctx context.Context, keys store.KeyStore, c createOpts, out io.Writer) error {
	k := store.AccessKey{ID: c.id, Secret: c.secret, Buckets: c.list, ReadOnly: c.readOnly, Policy: c.policy}
	generatedSecret := k.Secret == ""
	if k.ID == "" {
		k.ID = "S3K" + randomID()
	}
	if generatedSecret {
		k.Secret = randomSecret()
	}
	if err := keys.CreateKey(ctx, k); err != nil {
		return err
	}
	secret := k.Secret
	if !generatedSecret {
		secret = "(as given)" // never echo a secret the operator typed
	}
	tw := tabwriter.NewWriter(out, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "access key id:\t%s\n", k.ID)
	fmt.Fprintf(tw, "secret access key:\t%s\n", secret)
	fmt.Fprintf(tw, "buckets:\t%s\n", bucketsText(k.Buckets))
	fmt.Fprintf(tw, "access:\t%s\n", accessText(k.ReadOnly))
	fmt.Fprintf(tw, "policy:\t%s\n", policyText(k.Policy))
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if generatedSecret {
		fmt.Fprintln(out, "The secret is shown only this once: store it now.")
	}
	return nil
}

// listJSON is the output of `admin key list -json`.
type listJSON struct {
	// Root is the root key in use, nil when none is configured and the
	// gateway has not generated one yet.
	Root *rootJSON `json:"root"`
	Keys []keyJSON `json:"keys"`
}

type rootJSON struct {
	ID     string           `json:"id"`
	Origin server.KeyOrigin `json:"origin"`
}

type keyJSON struct {
	ID string `json:"id"`
	// Buckets the key may use; empty: every bucket.
	Buckets  []string  `json:"buckets"`
	ReadOnly bool      `json:"read_only"`
	Created  time.Time `json:"created"`
	// Policy is the key's policy document, absent for none.
	Policy json.RawMessage `json:"policy,omitempty"`
}

func list(ctx context.Context, keys store.KeyStore, root server.RootKey, asJSON bool, out io.Writer) error {
	ks, err := keys.ListKeys(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		l := listJSON{Keys: []keyJSON{}}
		if root.AccessKey != "" {
			l.Root = &rootJSON{ID: root.AccessKey, Origin: root.Origin}
		}
		for _, k := range ks {
			kj := keyJSON{ID: k.ID, Buckets: append([]string{}, k.Buckets...), ReadOnly: k.ReadOnly, Created: k.Created.UTC()}
			if k.Policy != "" {
				kj.Policy = json.RawMessage(k.Policy)
			}
			l.Keys = append(l.Keys, kj)
		}
		return writeJSON(out, l)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCESS KEY ID\tACCESS\tBUCKETS\tPOLICY\tCREATED")
	for _, k := range ks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, accessText(k.ReadOnly), bucketsText(k.Buckets), policyText(k.Policy), k.Created.UTC().Format(time.RFC3339))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// writeJSON prints v as indented JSON, the form of every -json listing.
func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

func bucketsText(b []string) string {
	if len(b) == 0 {
		return "(all)"
	}
	return strings.Join(b, ",")
}

// policyText says whether a key has a policy (list -json shows the
// document).
func policyText(doc string) string {
	if doc == "" {
		return "none"
	}
	return "yes"
}

func accessText(readOnly bool) string {
	if readOnly {
		return "read-only"
	}
	return "read-write"
}

// describe words the store's sentinels for an operator.
func describe(err error) error {
	switch {
	case errors.Is(err, store.ErrAccessKeyExists):
		return errors.New("an access key with this id already exists")
	case errors.Is(err, store.ErrNoSuchAccessKey):
		return errors.New("no such access key")
	}
	return err
}

// randomID returns 17 characters of upper-case base32 (85 bits).
func randomID() string {
	var b [11]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go >= 1.24)
	return base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:])[:17]
}

// randomSecret returns 40 URL-safe base64 characters (240 bits), never
// starting with '-'.
func randomSecret() string {
	var b [30]byte
	return randid.Base64URL(b[:])
}
