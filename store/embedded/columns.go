package embedded

import (
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/s3gate/s3gate/store"
)

// checksumArg stores an empty checksum as NULL, others as JSON.
func checksumArg(c store.Checksum) (any, error) {
	if c.Algorithm == "" {
		return nil, nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode checksum: %w", err)
	}
	return string(b), nil
}

// parseChecksum decodes a checksum column.
func parseChecksum(s sql.NullString) (store.Checksum, error) {
	var c store.Checksum
	if !s.Valid || s.String == "" {
		return c, nil
	}
	if err := json.Unmarshal([]byte(s.String), &c); err != nil {
		return c, fmt.Errorf("decode checksum: %w", err)
	}
	return c, nil
}

// parseMeta decodes a meta column.
func parseMeta(s string) (store.ObjectMeta, error) {
	var m store.ObjectMeta
	if s == "" {
		return m, nil
	}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return m, fmt.Errorf("decode metadata: %w", err)
	}
	return m, nil
}
