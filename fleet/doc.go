// Package fleet holds the PostgreSQL session adapter of ADR 0043 and what is
// built on it: content pins (shared advisory locks, reference-counted in
// process) and the single-instance ownership claim (an exclusive advisory lock).
//
// # Sessions
//
// A Session is one dedicated connection (pgx.ConnectConfig, never a pool
// member) whose application_name names its role ("s3gate-pins",
// "s3gate-owner"). A checker goroutine sends SELECT pg_backend_pid() every
// CheckInterval (2 s) with a CheckTimeout (2 s) deadline. Handles taken on the
// session are valid only while the send time of the last successful check is
// less than Window (8 s) old. A failed or timed-out check, an expired window or
// Close is a loss: it is sticky (a later check never revives the session), it
// invalidates every handle at once and it destroys the transport by closing the
// socket, which makes the server release the session's advisory locks.
//
// The server must never release a session (and its locks) while the client
// still trusts it, so the session sets its own idle_session_timeout, TCP
// keepalives and TCP_USER_TIMEOUT (client socket and server side) such that the
// fastest server-side release is at least Window+Margin after the last good
// check; OpenSession refuses settings that break that margin.
//
// # Pins and the GET path
//
// SessionPins implements Pinner with pg_try_advisory_lock_shared(BlobLockKey(id))
// held on one pin Session; LocalPins is the in-process Pinner of the embedded
// engine. The GET path must:
//
//  1. resolve the metadata (object -> blob ids) in one snapshot;
//  2. Acquire a pin for the first streamed blob before answering, and for each
//     later blob (part) when the stream reaches it, releasing the previous
//     one (inline content needs none): a stream holds one pin at a time;
//  3. re-check, in a fresh statement, that each blob row still exists: a GC that
//     took the exclusive lock before the pin may have deleted it in between, and
//     from then on the pin keeps GC from deleting it (GC takes
//     pg_try_advisory_lock(BlobLockKey(id)), exclusive, before it checks
//     references, and skips the blob when that fails);
//  4. call Pin.Valid (or the Guard func) for HEAD/304/416 answers too, before
//     the first read and for every quantum the bandwidth governor releases;
//  5. Release the pin exactly once when the response ends.
//
// SessionPins' mutex guards only in-process state: lock and unlock statements
// run outside it (a blob with a statement in flight is marked busy), so a slow
// round trip for one blob never blocks the pins of another.
//
// Acquire returns an error wrapping ErrTooManyPins beyond the per-instance cap
// (answer 503 SlowDown) and one wrapping ErrSessionLost while the pin session is
// lost or its replacement is not allowed yet (answer 503).
//
// # The fleet registry
//
// In fleet mode (docs/adr/009-fleet-mode.md) each instance Registers a row in
// the instances table under its InstanceID and heartbeats it every TTL/3 on a
// session of its own ("s3gate-registry"); Close deletes the row. The
// registration fences nothing: a lost session is replaced at the next
// heartbeat, and a reaped row is inserted again.
package fleet
