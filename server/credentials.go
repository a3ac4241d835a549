package server

import (
	"bufio"
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/store/localfs"
)

// CredentialsFile is where a generated root key pair is kept, in the data directory.
const CredentialsFile = "root-credentials"

// RootKey is the root key pair and where it came from.
type RootKey struct {
	AccessKey, SecretKey string
	// File is the credentials file when the pair was read from or written to one.
	File string
	// Generated is true on the start that created the pair: the only time the
	// secret is printed.
	Generated bool
}

// LoadRootKey returns the configured root key pair, or the one kept in the
// data directory, generating and storing it (mode 0600) on first start.
func LoadRootKey(cfg config.Config) (RootKey, error) {
	if cfg.RootAccess != "" {
		return RootKey{AccessKey: cfg.RootAccess, SecretKey: cfg.RootSecret}, nil
	}
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
	k = RootKey{AccessKey: "S3G" + randomString(17, true), SecretKey: randomString(30, false), File: path, Generated: true}
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
	k := RootKey{File: path}
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
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on supported platforms
	}
	if upper {
		return base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)[:n]
	}
	return base64.RawURLEncoding.EncodeToString(b)[:n]
}
