package server

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/randid"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/localfs"
)

// CredentialsFile is where the embedded default keeps its generated root key
// pair, in the data directory.
const CredentialsFile = "root-credentials"

// KeyOrigin says where the root key pair in use comes from.
type KeyOrigin string

// Origins of the root key pair.
const (
	// OriginEnvironment: ROOT_ACCESS_KEY / ROOT_SECRET_KEY, which always win.
	OriginEnvironment KeyOrigin = "environment"
	// OriginDatabase: generated once and kept in the PostgreSQL database
	// (table root_key), shared by every instance on it.
	OriginDatabase KeyOrigin = "generated-in-database"
	// OriginDataDir: generated once and kept in DATA_DIR/root-credentials
	// (the embedded default).
	OriginDataDir KeyOrigin = "generated-in-data-dir"
)

// rootKeyTable is where OriginDatabase keys are kept, for messages.
const rootKeyTable = "the database (table root_key)"

// RootKey is the root key pair and where it came from.
type RootKey struct {
	AccessKey, SecretKey string
	Origin               KeyOrigin
	// File is the credentials file when the pair was read from or written to
	// one (OriginDataDir).
	File string
	// Generated is true on the start that created the pair: the only time the
	// secret is printed. On PostgreSQL only the one instance whose insert
	// created it sees true.
	Generated bool
}

// Kept says where a generated pair is kept, for the start-up banner: the
// credentials file or the database; empty for a pair from the environment.
func (k RootKey) Kept() string {
	switch k.Origin {
	case OriginDatabase:
		return rootKeyTable
	case OriginDataDir:
		return k.File
	}
	return ""
}

// LoadRootKey returns the configured root key pair or the generated one,
// generating it on first start. db is the metadata engine's root key store
// (PostgreSQL): there the pair is kept in the database, so that standbys and
// every later instance accept the same key. Without one (the embedded
// default) it is kept in the data directory (mode 0600).
func LoadRootKey(ctx context.Context, cfg config.Config, db store.RootKeyStore) (RootKey, error) {
	if cfg.RootAccess != "" {
		return RootKey{AccessKey: cfg.RootAccess, SecretKey: cfg.RootSecret, Origin: OriginEnvironment}, nil
	}
	if db != nil {
		return loadDBKey(ctx, cfg, db)
	}
	return loadFileKey(cfg)
}

// FindRootKey returns the root key pair LoadRootKey would use without
// generating one; found is false when none was generated yet.
func FindRootKey(ctx context.Context, cfg config.Config, db store.RootKeyStore) (k RootKey, found bool, err error) {
	switch {
	case cfg.RootAccess != "":
		k, err = LoadRootKey(ctx, cfg, db)
	case db != nil:
		var sk store.AccessKey
		sk, err = db.RootKey(ctx)
		if err == nil {
			k = RootKey{AccessKey: sk.ID, SecretKey: sk.Secret, Origin: OriginDatabase}
		} else if errors.Is(err, store.ErrNoSuchAccessKey) {
			// The next start moves a pair an earlier version kept in the
			// data directory into the database.
			k, err = readKeyFile(filepath.Join(cfg.DataDir, CredentialsFile))
		}
	default:
		k, err = readKeyFile(filepath.Join(cfg.DataDir, CredentialsFile))
	}
	if errors.Is(err, store.ErrNoSuchAccessKey) || errors.Is(err, fs.ErrNotExist) {
		return RootKey{}, false, nil
	}
	return k, err == nil, err
}

// loadDBKey reads the database's root key, or stores a new one. A pair kept
// in the data directory by an earlier version is moved into the database
// rather than replaced, so that its clients keep working.
func loadDBKey(ctx context.Context, cfg config.Config, db store.RootKeyStore) (RootKey, error) {
	sk, err := db.RootKey(ctx)
	if err == nil {
		return RootKey{AccessKey: sk.ID, SecretKey: sk.Secret, Origin: OriginDatabase}, nil
	}
	if !errors.Is(err, store.ErrNoSuchAccessKey) {
		return RootKey{}, err
	}
	cand, adopted := newRootKey(), false
	old, err := readKeyFile(filepath.Join(cfg.DataDir, CredentialsFile))
	switch {
	case err == nil:
		cand.AccessKey, cand.SecretKey, adopted = old.AccessKey, old.SecretKey, true
	case !errors.Is(err, fs.ErrNotExist):
		return RootKey{}, err
	}
	sk, created, err := db.CreateRootKey(ctx, store.AccessKey{ID: cand.AccessKey, Secret: cand.SecretKey})
	if err != nil {
		return RootKey{}, err
	}
	// An adopted pair was shown when it was generated: no second banner.
	return RootKey{AccessKey: sk.ID, SecretKey: sk.Secret, Origin: OriginDatabase, Generated: created && !adopted}, nil
}

func newRootKey() RootKey {
	return RootKey{AccessKey: "S3G" + randomString(17, true), SecretKey: randomString(30, false), Generated: true}
}

// loadFileKey reads the pair kept in the data directory, generating and
// writing it on first start.
func loadFileKey(cfg config.Config) (RootKey, error) {
	path := filepath.Join(cfg.DataDir, CredentialsFile)
	k, err := readKeyFile(path)
	if err == nil {
		// A file from an older version or copied in may be wider: the secret
		// is the gateway's alone.
		if err := os.Chmod(path, localfs.FileMode); err != nil {
			return RootKey{}, fmt.Errorf("set mode of %s: %w", path, err)
		}
		if err := localfs.PrivateDir(cfg.DataDir); err != nil {
			return RootKey{}, fmt.Errorf("%sDATA_DIR: %w", config.Prefix, err)
		}
		return k, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return RootKey{}, err
	}
	if err := localfs.PrivateDir(cfg.DataDir); err != nil {
		return RootKey{}, fmt.Errorf("%sDATA_DIR: %w", config.Prefix, err)
	}
	k = newRootKey()
	k.File, k.Origin = path, OriginDataDir
	body := fmt.Sprintf("# s3gate root key pair, generated on first start\n%sROOT_ACCESS_KEY=%s\n%sROOT_SECRET_KEY=%s\n",
		config.Prefix, k.AccessKey, config.Prefix, k.SecretKey)
	// O_EXCL: two first starts racing cannot both believe they generated the key.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, localfs.FileMode)
	if errors.Is(err, fs.ErrExist) {
		return readKeyFile(path)
	}
	if err != nil {
		return RootKey{}, fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(localfs.FileMode); err != nil {
		_ = f.Close()
		return RootKey{}, fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.WriteString(body); err != nil {
		_ = f.Close()
		return RootKey{}, fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return RootKey{}, fmt.Errorf("sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return RootKey{}, fmt.Errorf("close %s: %w", path, err)
	}
	return k, nil
}

func readKeyFile(path string) (RootKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return RootKey{}, fmt.Errorf("read credentials: %w", err)
	}
	defer f.Close()
	k := RootKey{File: path, Origin: OriginDataDir}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, val, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		switch {
		case !ok:
		case name == config.Prefix+"ROOT_ACCESS_KEY":
			k.AccessKey = val
		case name == config.Prefix+"ROOT_SECRET_KEY":
			k.SecretKey = val
		}
	}
	if err := sc.Err(); err != nil {
		return RootKey{}, fmt.Errorf("read %s: %w", path, err)
	}
	if k.AccessKey == "" || k.SecretKey == "" {
		return RootKey{}, fmt.Errorf("%s: no %sROOT_ACCESS_KEY / %sROOT_SECRET_KEY in it (remove it to generate a new pair)", path, config.Prefix, config.Prefix)
	}
	return k, nil
}

// randomString returns n characters of crypto randomness: upper-case base32
// for access keys, base64url for secrets.
func randomString(n int, upper bool) string {
	b := make([]byte, n)
	if !upper {
		return randid.Base64URL(b)[:n] // never starting with '-'
	}
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on supported platforms
	}
	return base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)[:n]
}
