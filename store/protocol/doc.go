// Package protocol is the store protocol, written once for every engine: the
// order of the steps of a put, a multipart upload, a copy, a delete and a GET
// (resolve → conditions → range → pin → re-check → guarded stream), and S3's
// write, copy and listing rules. It sees no SQL text: a metadata engine
// (store/pg, store/embedded) contributes its statements, transactions, locks
// and pins through small interfaces (Dialect, Tx), and decides no step of the
// protocol. A large-content engine (pgchunks, pglo, files) is a Content.
package protocol
