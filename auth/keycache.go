package auth

import (
	"crypto/sha256"
	"strings"
	"sync"
)

// maxCachedKeys bounds the signing-key cache. A valid request's scope date
// is within the clock skew (header) or the last week (presigned), so a key
// has a handful of live entries; past the bound the cache starts afresh.
const maxCachedKeys = 1024

// keyCache holds derived SigV4 signing keys, which cost four HMACs each. An
// entry is found by the secret's SHA-256, never by the access key ID alone:
// a rotated secret is a different entry, and no secret is kept. It caches
// derived keys only, never whether an access key exists: the caller looks
// the secret up on every request, so a deleted key is refused at once. The
// zero value is ready; it is safe for concurrent use.
type keyCache struct {
	mu   sync.RWMutex
	keys map[keyID][]byte
}

type keyID struct {
	secret                [sha256.Size]byte
	date, region, service string
}

// get returns the signing key of secret for the scope, deriving it on a
// miss. The returned slice is shared: callers must not modify it.
func (c *keyCache) get(secret, date, region, service string) []byte {
	// The stack buffer keeps the common (short) secret off the heap.
	var buf [128]byte
	id := keyID{secret: sha256.Sum256(append(buf[:0], secret...)), date: date, region: region, service: service}
	c.mu.RLock()
	k, ok := c.keys[id]
	c.mu.RUnlock()
	if ok {
		return k
	}
	k = deriveSigningKey(secret, date, region, service)
	// The scope strings point into the request's headers: keep copies.
	id.date, id.region, id.service = strings.Clone(date), strings.Clone(region), strings.Clone(service)
	c.mu.Lock()
	if c.keys == nil || len(c.keys) >= maxCachedKeys {
		c.keys = make(map[keyID][]byte)
	}
	c.keys[id] = k
	c.mu.Unlock()
	return k
}

// deriveSigningKey derives the SigV4 signing key of one day, region and
// service.
func deriveSigningKey(secret, date, region, service string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), []byte(date))
	k = hmacSHA256(k[:], []byte(region))
	k = hmacSHA256(k[:], []byte(service))
	k = hmacSHA256(k[:], []byte(scopeTerm))
	return k[:]
}
