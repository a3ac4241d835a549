package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/store/localfs"
)

// Preflight checks, before anything waits, opens or says "serving", what a
// bad setting would otherwise fail later: the TLS certificate and key load,
// and the data directory, where the gateway keeps files, is a writable
// directory (created if missing). The database URL's form is checked by
// config; its connection by WaitForDatabase. Errors are config.SettingErrors.
func Preflight(cfg config.Config) error {
	if cfg.TLSCertFile != "" {
		if _, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile); err != nil {
			return &config.SettingError{Keys: []string{"TLS_CERT_FILE", "TLS_KEY_FILE"}, Err: err}
		}
	}
	// The embedded default, the local engine and a generated root key keep
	// files there; PostgreSQL with both content and keys elsewhere needs none.
	if cfg.DatabaseURL == "" || cfg.LargeEngine == config.EngineLocal || cfg.RootAccess == "" {
		if err := usableDir(cfg.DataDir); err != nil {
			return config.Errorf("DATA_DIR", "%w", err)
		}
	}
	return nil
}

// usableDir creates dir (private) if missing and checks that a file can be
// created in it.
func usableDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := localfs.PrivateDir(dir); err != nil {
			return err
		}
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	f, err := os.CreateTemp(dir, ".preflight-*")
	if err != nil {
		return fmt.Errorf("%s is not writable: %w", dir, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	return os.Remove(f.Name())
}

// keyError is an error of New after it generated the root key pair: the
// pair is kept, so the next start will not show its secret (GeneratedKey).
type keyError struct {
	key RootKey
	err error
}

func (e *keyError) Error() string { return e.err.Error() }
func (e *keyError) Unwrap() error { return e.err }

// GeneratedKey returns the root key pair that New (returning s, err) has just
// generated, whether New succeeded or failed after generating it: the caller
// shows it at once, this being the only start that can.
func GeneratedKey(s *Server, err error) (RootKey, bool) {
	var kerr *keyError
	if errors.As(err, &kerr) {
		return kerr.key, true
	}
	if err == nil && s.RootKey.Generated {
		return s.RootKey, true
	}
	return RootKey{}, false
}

// Flatten is err's message on one line: errors of the PostgreSQL driver put
// each address they tried on a line of its own ("\n\t"), which a log line
// must not carry raw. A line that follows one ending in ":" continues it; the
// others are joined with "; ".
func Flatten(err error) string {
	var b strings.Builder
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
			continue
		case b.Len() == 0:
		case strings.HasSuffix(b.String(), ":"):
			b.WriteString(" ")
		default:
			b.WriteString("; ")
		}
		b.WriteString(line)
	}
	return b.String()
}
