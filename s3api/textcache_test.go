package s3api

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

// TestTextCache: a document is parsed once per distinct text, a changed
// text is parsed anew (never answered from the older parse), a failed parse
// is not kept, and the cache stays within maxDocs.
func TestTextCache(t *testing.T) {
	var c textCache[string, *string]
	parses := 0
	get := func(doc string) (*string, error) {
		return c.get(doc, func() (*string, error) {
			parses++
			if doc == "bad" {
				return nil, errors.New("bad document")
			}
			v := "parsed " + doc
			return &v, nil
		})
	}
	steps := []struct {
		doc        string
		want       string
		wantErr    bool
		wantParses int
	}{
		{"a", "parsed a", false, 1},
		{"a", "parsed a", false, 1}, // cached
		{"b", "parsed b", false, 2}, // changed text: parsed again
		{"a", "parsed a", false, 2},
		{"bad", "", true, 3},
		{"bad", "", true, 4}, // errors are not kept
	}
	for i, s := range steps {
		v, err := get(s.doc)
		if (err != nil) != s.wantErr || (err == nil && *v != s.want) || parses != s.wantParses {
			t.Fatalf("step %d (%q): %v, %v after %d parses; want %q, error %v, %d parses", i, s.doc, v, err, parses, s.want, s.wantErr, s.wantParses)
		}
	}
	for i := range 3 * maxDocs {
		if _, err := get(fmt.Sprint("doc", i)); err != nil {
			t.Fatal(err)
		}
		if n := len(c.m); n > maxDocs {
			t.Fatalf("%d documents cached, want at most %d", n, maxDocs)
		}
	}
}

// TestTextCacheConcurrent: requests share the cache (run with -race): each
// gets the parse of its own text, with parses and evictions interleaved.
func TestTextCacheConcurrent(t *testing.T) {
	var c textCache[string, string]
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range maxDocs {
				doc := fmt.Sprint("doc", (g*maxDocs+i)%(2*maxDocs))
				v, err := c.get(doc, func() (string, error) { return "parsed " + doc, nil })
				if err != nil || v != "parsed "+doc {
					t.Errorf("get(%q) = %q, %v", doc, v, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
