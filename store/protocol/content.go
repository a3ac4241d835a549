package protocol

import (
	"context"
	"io"
)

// Content is a large-content engine as the staged put drives it. Content
// inside the metadata database (pgchunks, pglo) stages under a fresh blob id
// that the put pins, outside any transaction, and the joint transaction claims
// it (ADR 007). Content that cannot take part in that transaction (files)
// stages before BEGIN and is placed under the new blob row's id inside the
// transaction, before COMMIT (design §2). The protocol orders the steps.
type Content interface {
	// Tier is the tier of the blob rows whose content this engine writes.
	Tier() string
	// FreshID returns the blob id to stage under, for content that stages
	// under one (ok true); content placed under its new row's id has none.
	FreshID(ctx context.Context) (id int64, ok bool, err error)
	// Stage writes r to new staged content, outside any transaction. id is
	// FreshID's id, or 0. The result is never nil: after an error it unstages
	// what was written.
	Stage(ctx context.Context, id int64, r io.Reader) (Staged, error)
	// Slot waits for what the joint transaction of staged content needs
	// (content on the metadata pool shares a staging slot with its staging
	// writes, ADR 007) and returns its release.
	Slot(ctx context.Context) (release func(), err error)
}

// Staged is the content of one put between staging and publish.
type Staged interface {
	// Claim takes the content from its stage inside the joint transaction,
	// before the blob row is written, and returns the large object the row
	// records (nil for none).
	Claim(ctx context.Context, tx Tx) (*uint32, error)
	// Place gives the content to blob row id inside the joint transaction:
	// inserted is false when the row already existed (deduplication), and the
	// staged content is dropped. Content placed outside the database (files)
	// may be placed with tx nil, before the joint transaction (the pin-first
	// order with row pins).
	Place(ctx context.Context, tx Tx, id int64, inserted bool) error
	// Placed returns the blob id under which Place may have put content
	// outside the transaction (a file), 0 if none: a transaction that then
	// fails leaves it unreferenced.
	Placed() int64
	// Unstage drops what is still staged after a failed put; content that a
	// committed transaction claimed or placed is not touched.
	Unstage(ctx context.Context) error
	// Unplace removes the content Placed names.
	Unplace(ctx context.Context, id int64) error
}
