package store

import (
	"errors"
	"testing"
	"time"
)

func TestParseRange(t *testing.T) {
	tests := []struct {
		spec    string
		size    int64
		want    *ByteRange
		wantErr error
	}{
		{"", 100, nil, nil},
		{"bytes=0-9", 100, &ByteRange{0, 9}, nil},
		{"bytes=10-", 100, &ByteRange{10, 99}, nil},
		{"bytes=-10", 100, &ByteRange{90, 99}, nil},
		{"bytes=-1000", 100, &ByteRange{0, 99}, nil},
		{"bytes=0-1000", 100, &ByteRange{0, 99}, nil},
		{"bytes=99-99", 100, &ByteRange{99, 99}, nil},
		{"bytes=0-0", 1, &ByteRange{0, 0}, nil},
		{"Bytes = 5 - 6", 100, &ByteRange{5, 6}, nil},
		// ignored: syntactically invalid or multi-range
		{"bytes=0-1,5-6", 100, nil, nil},
		{"bytes=9-5", 100, nil, nil},
		{"bytes=a-b", 100, nil, nil},
		{"bytes=-", 100, nil, nil},
		{"bytes=5", 100, nil, nil},
		{"bytes=+1-2", 100, nil, nil},
		{"bytes=--5", 100, nil, nil},
		{"items=0-1", 100, nil, nil},
		{"bytes=0-99999999999999999999", 100, nil, nil},
		{"0-1", 100, nil, nil},
		// unsatisfiable
		{"bytes=100-", 100, nil, ErrInvalidRange},
		{"bytes=100-200", 100, nil, ErrInvalidRange},
		{"bytes=-0", 100, nil, ErrInvalidRange},
		{"bytes=0-0", 0, nil, ErrInvalidRange},
		{"bytes=-5", 0, nil, nil}, // S3: a suffix of an empty object is the whole object (200)
		{"bytes=-1", 0, nil, nil},
		{"bytes=-0", 0, nil, ErrInvalidRange},
		{"bytes=0-", 0, nil, ErrInvalidRange},
	}
	for _, tt := range tests {
		got, err := ParseRange(tt.spec, tt.size)
		if tt.wantErr != nil {
			if !errors.Is(err, tt.wantErr) || got != nil {
				t.Errorf("ParseRange(%q, %d) = %v, %v; want nil, %v", tt.spec, tt.size, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseRange(%q, %d) error %v", tt.spec, tt.size, err)
			continue
		}
		if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
			t.Errorf("ParseRange(%q, %d) = %v, want %v", tt.spec, tt.size, got, tt.want)
		}
	}
}

func TestEvalConditions(t *testing.T) {
	lm := time.Date(2024, 5, 1, 12, 0, 0, 700_000_000, time.UTC) // sub-second part must not count
	at := func(d time.Duration) *time.Time { v := lm.Truncate(time.Second).Add(d); return &v }
	const etag = "abc123"
	tests := []struct {
		name string
		c    Conditions
		want error
	}{
		{"none", Conditions{}, nil},
		{"if-match hit", Conditions{IfMatch: `"abc123"`}, nil},
		{"if-match unquoted", Conditions{IfMatch: "abc123"}, nil},
		{"if-match list", Conditions{IfMatch: `"x", "abc123"`}, nil},
		{"if-match star", Conditions{IfMatch: "*"}, nil},
		{"if-match miss", Conditions{IfMatch: `"zzz"`}, ErrPreconditionFailed},
		{"if-unmodified-since same second", Conditions{IfUnmodifiedSince: at(0)}, nil},
		{"if-unmodified-since later", Conditions{IfUnmodifiedSince: at(time.Hour)}, nil},
		{"if-unmodified-since earlier", Conditions{IfUnmodifiedSince: at(-time.Second)}, ErrPreconditionFailed},
		{"if-match wins over if-unmodified-since", Conditions{IfMatch: etag, IfUnmodifiedSince: at(-time.Hour)}, nil},
		{"if-none-match hit", Conditions{IfNoneMatch: `"abc123"`}, ErrNotModified},
		{"if-none-match weak hit", Conditions{IfNoneMatch: `W/"abc123"`}, ErrNotModified},
		{"if-none-match star", Conditions{IfNoneMatch: "*"}, ErrNotModified},
		{"if-none-match miss", Conditions{IfNoneMatch: `"zzz"`}, nil},
		{"if-modified-since same second", Conditions{IfModifiedSince: at(0)}, ErrNotModified},
		{"if-modified-since later", Conditions{IfModifiedSince: at(time.Hour)}, ErrNotModified},
		{"if-modified-since earlier", Conditions{IfModifiedSince: at(-time.Second)}, nil},
		{"if-none-match miss wins over if-modified-since", Conditions{IfNoneMatch: `"zzz"`, IfModifiedSince: at(time.Hour)}, nil},
		{"if-match fails before if-none-match", Conditions{IfMatch: "zzz", IfNoneMatch: etag}, ErrPreconditionFailed},
		{"if-match ok then if-none-match hit", Conditions{IfMatch: etag, IfNoneMatch: etag}, ErrNotModified},
		{"if-match ok then if-modified-since not modified", Conditions{IfMatch: etag, IfModifiedSince: at(0)}, ErrNotModified},
		{"if-unmodified-since fails before if-none-match", Conditions{IfUnmodifiedSince: at(-time.Hour), IfNoneMatch: etag}, ErrPreconditionFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := EvalConditions(tt.c, `"`+etag+`"`, lm)
			if tt.want == nil && err != nil {
				t.Fatalf("EvalConditions = %v, want nil", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("EvalConditions = %v, want %v", err, tt.want)
			}
		})
	}
}
