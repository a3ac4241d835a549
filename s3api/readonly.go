package s3api

import "strings"

// checkReadOnly refuses, on a read replica, every operation that is not a
// read: the one place where a read-only gateway says no to writes, before
// any handler or the store sees them.
func (a *api) checkReadOnly(rq *request) error {
	if a.cfg.ReadOnly && !isRead(rq.op) {
		return errReadOnly
	}
	return nil
}

// isRead reports whether an operation only reads: S3 names every reading
// API Get*, Head* or List* (presigned GETs are GetObject), and nothing else
// reads.
func isRead(op string) bool {
	return strings.HasPrefix(op, "Get") || strings.HasPrefix(op, "Head") || strings.HasPrefix(op, "List")
}
