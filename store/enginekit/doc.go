// Package enginekit holds helpers shared by the metadata engines (store/pg and
// store/embedded): the engine-independent parts of listing, ranged and
// multi-segment reads, pinned content streams and S3's write and copy
// checks. Nothing here speaks SQL; the engines keep their statements.
package enginekit
