package s3api

import (
	"net/http"
	"slices"
	"strings"

	"github.com/s3gate/s3gate/store"
)

// Headers that ask for features s3gate does not have. Each is refused with a
// clear error rather than accepted and ignored: a backup tool that sets a
// retention must never believe it got one (design §4, invariant 10).

// errNoObjectLock is AWS's answer to an Object Lock header or call on a
// bucket without Object Lock (objectlock.go honours them on the others).
var errNoObjectLock = errInvalidRequest.withMessage("Bucket is missing Object Lock Configuration")

// storageClassesAWS are the names AWS accepts in x-amz-storage-class.
// s3gate keeps STANDARD and REDUCED_REDUNDANCY (the same media for both: the
// name is stored and returned); the others promise a retrieval or pricing
// tier it does not have, so they are refused as invalid here.
var storageClassesAWS = map[string]bool{
	"STANDARD": true, "REDUCED_REDUNDANCY": true, "STANDARD_IA": true, "ONEZONE_IA": true,
	"INTELLIGENT_TIERING": true, "GLACIER": true, "DEEP_ARCHIVE": true, "OUTPOSTS": true,
	"GLACIER_IR": true, "SNOW": true, "EXPRESS_ONEZONE": true,
}

// parseStorageClass reads x-amz-storage-class as it is stored: "" for none
// or STANDARD, REDUCED_REDUNDANCY, InvalidStorageClass for anything else.
func parseStorageClass(h http.Header) (string, error) {
	switch sc := h.Get("X-Amz-Storage-Class"); {
	case sc == "" || sc == "STANDARD":
		return "", nil
	case sc == "REDUCED_REDUNDANCY":
		return sc, nil
	case storageClassesAWS[sc]:
		return "", errInvalidStorageClass.withMessage("The storage class " + sc + " is not supported: s3gate stores STANDARD and REDUCED_REDUNDANCY only.")
	default:
		return "", errInvalidStorageClass
	}
}

// storageClassName is the storage class listings and attributes show.
func storageClassName(m store.ObjectMeta) string {
	if m.StorageClass == "" {
		return "STANDARD"
	}
	return m.StorageClass
}

// Server-side encryption is not implemented: every request that asks for it
// (x-amz-server-side-encryption*, SSE-C's
// x-amz-server-side-encryption-customer-*, a copy source's
// x-amz-copy-source-server-side-encryption-customer-*) is refused, whatever
// the operation, so that no client believes its data is encrypted at rest.
var ssePrefixes = []string{"x-amz-server-side-encryption", "x-amz-copy-source-server-side-encryption"}

// sseMethods are the values AWS knows for x-amz-server-side-encryption.
var sseMethods = map[string]bool{"AES256": true, "aws:kms": true, "aws:kms:dsse": true}

// checkEncryption refuses the server-side encryption headers: NotImplemented
// naming the header (as for Object Lock and tagging), or InvalidArgument for
// a method AWS does not know either.
func checkEncryption(h http.Header) error {
	if m := h.Get("X-Amz-Server-Side-Encryption"); m != "" && !sseMethods[m] {
		return errInvalidArgument.withMessage("The encryption method specified is not supported")
	}
	var names []string
	for name, vals := range h {
		// Folded prefix comparison: lower-casing every name would allocate.
		if slices.ContainsFunc(ssePrefixes, func(p string) bool { return len(name) >= len(p) && strings.EqualFold(name[:len(p)], p) }) &&
			strings.Join(vals, "") != "" {
			names = append(names, strings.ToLower(name))
		}
	}
	if len(names) == 0 {
		return nil
	}
	return errNotImplemented.withMessage("Server-side encryption (" + slices.Min(names) + ") is not supported: s3gate stores objects unencrypted.")
}

// checkWriteFeatures refuses the headers of PutObject, CopyObject and
// CreateMultipartUpload that would change what is stored in ways s3gate
// does not honour: website redirects, appends. (Storage classes are read,
// and refused, with the metadata: parseStorageClass; Object Lock headers by
// writeLock.)
func checkWriteFeatures(h http.Header) error {
	if h.Get("X-Amz-Website-Redirect-Location") != "" {
		return errNotImplemented.withMessage("x-amz-website-redirect-location is not supported: s3gate serves no website endpoints.")
	}
	if h.Get("X-Amz-Write-Offset-Bytes") != "" {
		// An append taken as a whole-object PUT would replace the object.
		return errNotImplemented.withMessage("Appends (x-amz-write-offset-bytes) are not supported: s3gate replaces whole objects only.")
	}
	return nil
}

// errConditionalDelete answers the conditional deletes S3 has for directory
// buckets only (x-amz-if-match-last-modified-time, x-amz-if-match-size;
// LastModifiedTime or Size in DeleteObjects): deleting anyway would be the
// very loss the condition guards against.
var errConditionalDelete = errNotImplemented.withMessage("Conditional deletes by last-modified time or size (x-amz-if-match-last-modified-time, x-amz-if-match-size; LastModifiedTime or Size in DeleteObjects) are not supported; If-Match (ETag in DeleteObjects) is.")

// errConditionalVersionDelete answers If-Match with a version id: S3
// judges a conditional delete against the current version only, and what it
// means for the removal of another version is not settled.
var errConditionalVersionDelete = errNotImplemented.withMessage("If-Match (ETag in DeleteObjects) with a version id is not supported; a conditional delete applies to the current version.")

// deleteCondition reads DeleteObject's If-Match for a delete of version vid
// ("" the current one), refusing the conditions s3gate does not judge.
func deleteCondition(h http.Header, vid string) (string, error) {
	for _, name := range []string{"x-amz-if-match-last-modified-time", "x-amz-if-match-size"} {
		if h.Get(name) != "" {
			return "", errConditionalDelete
		}
	}
	ifMatch := strings.TrimSpace(h.Get("If-Match"))
	if ifMatch != "" && vid != "" {
		return "", errConditionalVersionDelete
	}
	return ifMatch, nil
}

// copyTags reads CopyObject's x-amz-tagging-directive: COPY (the default:
// the source's tags, nil here) or REPLACE (the request's x-amz-tagging,
// none being an empty set).
func copyTags(h http.Header) ([]store.Tag, error) {
	// Case-sensitive, as the metadata directive is on S3.
	switch h.Get("X-Amz-Tagging-Directive") {
	case "", "COPY":
		if _, err := parseTaggingHeader(h); err != nil {
			return nil, err
		}
		return nil, nil
	case "REPLACE":
		tags, err := parseTaggingHeader(h)
		if tags == nil {
			tags = []store.Tag{}
		}
		return tags, err
	default:
		return nil, errInvalidArgument.withMessage("Unknown tagging directive.")
	}
}

// checkIfNoneMatchWrite accepts only "If-None-Match: *" on PutObject,
// CompleteMultipartUpload and CopyObject, as AWS does: any other value is
// NotImplemented.
func checkIfNoneMatchWrite(h http.Header) error {
	if v := h.Get("If-None-Match"); v != "" && strings.TrimSpace(v) != "*" {
		return errNotImplemented.withMessage("If-None-Match with an entity tag is not supported on writes; use If-None-Match: *.")
	}
	return nil
}

// checkExpectedOwner compares x-amz-expected-bucket-owner (and, for copies,
// x-amz-source-expected-bucket-owner) with the owner id this gateway reports
// for the caller's buckets (ownerOf): a mismatch is AccessDenied, as on AWS.
func checkExpectedOwner(rq *request) error {
	id := ownerOf(rq).ID
	for _, name := range []string{"X-Amz-Expected-Bucket-Owner", "X-Amz-Source-Expected-Bucket-Owner"} {
		if v := rq.r.Header.Get(name); v != "" && v != id {
			return errAccessDenied
		}
	}
	return nil
}
