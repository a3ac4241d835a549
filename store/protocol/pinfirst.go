package protocol

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/s3gate/s3gate/store"
)

// stagedPutPinFirst publishes content placed outside the database (files)
// when row pins are on, in the order of design §2 for shared media: the pin
// first, the bytes second, the entry last (ADR 010).
//
//  1. A placeholder blob row (the real size, a random address that no put
//     dedups against) and its pin row commit: the pin is durable, and no
//     instance's GC deletes the row or reaps a file at its id while it holds.
//  2. The stage file is renamed into place under that id (file and directory
//     fsynced).
//  3. The joint transaction gives the row its real address (or, when a blob
//     with that address exists, dedups against it and drops the
//     placeholder), writes the referencing rows and renews the pin.
//  4. The pin is released (its row lives out its TTL).
//
// No object is ever visible without its bytes: nothing references the
// placeholder before step 3, and no put can dedup against an address that is
// not yet the real one. A crash leaves at worst a placeholder row with its
// pin and maybe its file: the pin expires, and GC deletes the unreferenced row
// and its file.
func (s *Store) stagedPutPinFirst(ctx context.Context, st Staged, d store.Digests, keys []int64, publish publishFunc) error {
	ph := d
	if _, err := rand.Read(ph.SHA256[:]); err != nil {
		return s.abandon(ctx, st, fmt.Errorf("placeholder address: %w", err))
	}
	pin := s.jointPins()
	var id int64
	err := s.dialect.Write(ctx, nil, func(tx Tx) error {
		var err error
		if id, _, err = tx.UpsertBlob(ctx, Blob{Digests: ph, Tier: s.content.Tier()}); err != nil {
			return err
		}
		return pin.pin(ctx, tx, id)
	})
	if err != nil {
		// A placeholder that committed after all is unreferenced: GC's.
		return s.abandon(ctx, st, fmt.Errorf("pin first: %w", err))
	}
	defer pin.adopt()() // the guard lives, renewed, until the put ends
	if s.testHookPinned != nil {
		s.testHookPinned(id)
	}
	if err := st.Place(ctx, nil, id, true); err != nil {
		return s.dropPlaceholder(ctx, st, id, s.abandon(ctx, st, err))
	}
	jp := s.jointPins()
	var got int64
	err = s.dialect.Write(ctx, keys, func(tx Tx) error {
		var promoted bool
		var err error
		if got, promoted, err = tx.PromoteBlob(ctx, id, d); err != nil {
			return err
		}
		if !promoted {
			if err := tx.DropBlob(ctx, id, s.rowPins.Owner()); err != nil {
				return err
			}
		}
		if err := publish(ctx, tx, got, d); err != nil {
			return err
		}
		return jp.pin(ctx, tx, got)
	})
	var ce *CommitError
	switch {
	case errors.As(err, &ce):
		return err // outcome unknown: whatever is left is unreferenced, for GC
	case err != nil:
		return s.dropPlaceholder(ctx, st, id, err)
	}
	jp.adopt()()
	if got != id { // deduplicated: the placeholder row is gone, its id never comes back
		return s.unplace(ctx, st, nil)
	}
	return nil
}

// dropPlaceholder removes the placeholder row id (with this instance's pin of
// it) and its file after the put failed with err.
func (s *Store) dropPlaceholder(ctx context.Context, st Staged, id int64, err error) error {
	rctx, cancel := cleanupContext(ctx)
	defer cancel()
	if derr := s.dialect.Write(rctx, nil, func(tx Tx) error { return tx.DropBlob(rctx, id, s.rowPins.Owner()) }); derr != nil {
		return errors.Join(err, fmt.Errorf("drop placeholder blob %d (left for GC): %w", id, derr))
	}
	return s.unplace(rctx, st, err)
}
