package s3api

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/s3gate/s3gate/auth"
	"github.com/s3gate/s3gate/store"
)

func (a *api) putObject(rq *request) error {
	acl, err := a.writeACL(rq)
	if err != nil {
		return err
	}
	if err := checkWriteFeatures(rq.r.Header); err != nil {
		return err
	}
	if err := checkIfNoneMatchWrite(rq.r.Header); err != nil {
		return err
	}
	opts, err := putOptions(rq, true)
	if err != nil {
		return err
	}
	opts.Meta.ACL = acl
	if opts.Meta.Lock, err = a.writeLock(rq, true); err != nil {
		return err
	}
	if err := a.precheckWrite(rq, opts); err != nil {
		return err
	}
	opts.PayloadSHA256 = signedPayload(rq)
	info, err := a.st.PutObject(rq.ctx, rq.bucket, rq.key, rq.body, opts)
	if err != nil {
		return fmt.Errorf("put object %q/%q: %w", rq.bucket, rq.key, err)
	}
	h := rq.w.Header()
	h.Set("ETag", quoteETag(info.ETag))
	setChecksumHeader(h, info.Checksum)
	if err := a.setVersionHeader(rq, info.VersionID); err != nil {
		return err
	}
	a.setExpiration(rq, info, opts.Meta.Tags)
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// signedPayload hands the check of a signed x-amz-content-sha256 over to the
// store, which computes the body's SHA-256 anyway (the content address): the
// body is then hashed once instead of twice. Only the object put paths
// (PutObject, UploadPart) call it, right before the store reads the body;
// every other body keeps auth's own check. Nil when the payload is not a
// signed hash (unsigned, aws-chunked).
func signedPayload(rq *request) *[32]byte { return auth.TakeSignedSHA256(rq.body.r) }

// precheckWrite fails a conditional PutObject early, before its body is
// read, when the condition already does not hold: a client sending
// "If-None-Match: *" with a large body (and Expect: 100-continue) gets its
// 412 without uploading. The authoritative check is the engine's, atomic
// with the write under the object's lock; this one only saves the transfer.
func (a *api) precheckWrite(rq *request, opts store.PutOptions) error {
	if opts.IfMatch == "" && opts.IfNoneMatch != "*" {
		return nil
	}
	info, err := a.headObject(rq, "")
	exists := err == nil
	if err != nil && !errors.Is(err, store.ErrNoSuchKey) {
		return err
	}
	if opts.IfNoneMatch == "*" && exists {
		return fmt.Errorf("%w: the object exists (If-None-Match: *)", store.ErrPreconditionFailed)
	}
	if opts.IfMatch != "" {
		if !exists {
			return fmt.Errorf("put object %q/%q with If-Match: %w", rq.bucket, rq.key, err)
		}
		if store.EvalConditions(store.Conditions{IfMatch: opts.IfMatch}, info.ETag, info.LastModified) != nil {
			return fmt.Errorf("%w: If-Match %s does not match", store.ErrPreconditionFailed, opts.IfMatch)
		}
	}
	return nil
}

// getObject serves GetObject and HeadObject.
func (a *api) getObject(rq *request) error {
	head := rq.r.Method == http.MethodHead
	if rq.anonymous && hasResponseOverride(rq) {
		return errAnonymousOverrides
	}
	vid, err := versionParam(rq)
	if err != nil {
		return err
	}
	part, err := parsePartNumber(rq, false)
	if err != nil {
		return err
	}
	opts := store.GetOptions{
		RangeSpec:  rq.r.Header.Get("Range"),
		PartNumber: part,
		Cond:       parseConditions(rq.r.Header, ""),
		VersionID:  vid,
	}
	if opts.RangeSpec != "" && part > 0 {
		return errRangeWithPart
	}
	info, rng, rd, err := a.st.GetObject(rq.ctx, rq.bucket, rq.key, opts, head)
	if rd != nil {
		defer rd.Close() //nolint:errcheck // releasing the pin; a read error was already handled
	}
	switch {
	case errors.Is(err, store.ErrNotModified):
		setValidators(rq.w.Header(), info)
		return err
	case errors.Is(err, store.ErrInvalidRange):
		rq.w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(info.Size, 10))
		if part > 0 {
			return errPartNotSatisfiable // S3's code for a part number beyond the count
		}
		// As S3 does, the answer names the range as sent and the object's
		// size, so that a client can re-request what exists.
		return withDetails(errInvalidRange, "RangeRequested", opts.RangeSpec, "ActualObjectSize", strconv.FormatInt(info.Size, 10))
	case err != nil:
		return a.versionError(rq, info, fmt.Errorf("get object %q/%q: %w", rq.bucket, rq.key, err))
	}
	setObjectHeaders(rq, info)
	if err := a.setVersionHeader(rq, info.VersionID); err != nil {
		return err
	}
	setLockHeaders(rq, info)
	a.setExpiration(rq, info, info.Meta.Tags)
	h := rq.w.Header()
	length, status := info.Size, http.StatusOK
	if rng != nil {
		length, status = rng.End-rng.Start+1, http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", rng.Start, rng.End, info.Size))
	}
	if part > 0 && len(info.Parts) > 0 {
		h.Set("X-Amz-Mp-Parts-Count", strconv.Itoa(len(info.Parts)))
	}
	if strings.EqualFold(rq.r.Header.Get("X-Amz-Checksum-Mode"), "ENABLED") {
		switch {
		case part > 0 && len(info.Parts) >= part:
			// As S3: a part's own checksum where the object's is built from
			// its parts' (COMPOSITE) or is that part's (one part); a
			// FULL_OBJECT checksum of several parts describes no single part,
			// so none is returned.
			if info.Checksum.Type == store.ChecksumComposite || len(info.Parts) == 1 {
				setChecksumHeader(h, info.Parts[part-1].Checksum)
			}
		case rng == nil, part > 0 && len(info.Parts) == 0:
			// Whole-object reads only (part 1 of a single put is the whole
			// object): a range's bytes do not match the stored checksum.
			setChecksumHeader(h, info.Checksum)
		}
	}
	h.Set("Content-Length", strconv.FormatInt(length, 10))
	rq.w.WriteHeader(status)
	if head || rd == nil {
		return nil
	}
	a.copyBody(rq, rd, length)
	return nil
}

// copyBody streams the object to the client. After the headers went out, a
// failed or short copy aborts the connection so the client sees a truncated
// answer, never a clean end.
func (a *api) copyBody(rq *request, rd io.Reader, length int64) {
	if wt, ok := rd.(io.WriterTo); ok {
		// A stream of files sends them itself (sendfile), with the checks of
		// its Read path (ADR 020); its segments add up to length.
		n, err := wt.WriteTo(rq.w)
		if err != nil {
			a.abort(rq, fmt.Errorf("send object: %w", err))
		}
		if n != length {
			a.abort(rq, fmt.Errorf("store returned %d of %d bytes", n, length))
		}
		return
	}
	bufp := a.bufs.Get().(*[]byte)
	defer a.bufs.Put(bufp)
	buf := *bufp
	var n int64
	for {
		m, rerr := rd.Read(buf)
		if m > 0 {
			if n+int64(m) > length {
				a.abort(rq, fmt.Errorf("store returned more than %d bytes", length))
			}
			if _, werr := rq.w.Write(buf[:m]); werr != nil {
				a.abort(rq, fmt.Errorf("write to client: %w", werr))
			}
			n += int64(m)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			a.abort(rq, fmt.Errorf("read object: %w", rerr))
		}
	}
	if n != length {
		a.abort(rq, fmt.Errorf("store returned %d of %d bytes", n, length))
	}
}

func (a *api) abort(rq *request, err error) {
	rq.errCode = "Aborted"
	a.log.LogAttrs(rq.ctx, slog.LevelWarn, "s3 response aborted",
		slog.String("request_id", rq.id), slog.String("op", rq.op),
		slog.String("bucket", rq.bucket), slog.String("key", rq.key),
		slog.String("error", err.Error()))
	panic(http.ErrAbortHandler)
}

// deleteObject deletes the key, or the version named, as the bucket's
// versioning state says; a bucket that never had versioning keeps the plain
// delete (no version headers).
func (a *api) deleteObject(rq *request) error {
	vid, err := versionParam(rq)
	if err != nil {
		return err
	}
	ifMatch, err := deleteCondition(rq.r.Header, vid)
	if err != nil {
		return err
	}
	state := ""
	if vid == "" {
		if state, err = a.bucketVersioning(rq, rq.bucket); err != nil {
			return err
		}
	}
	if vid == "" && state == "" && ifMatch == "" {
		if err := a.st.DeleteObject(rq.ctx, rq.bucket, rq.key); err != nil {
			return fmt.Errorf("delete object %q/%q: %w", rq.bucket, rq.key, err)
		}
		rq.w.WriteHeader(http.StatusNoContent)
		return nil
	}
	res, err := a.st.DeleteObjectVersion(rq.ctx, rq.bucket, rq.key, store.DeleteOptions{VersionID: vid, IfMatch: ifMatch, BypassGovernance: a.bypassGovernance(rq, rq.key)})
	if err != nil {
		return fmt.Errorf("delete object %q/%q version %q: %w", rq.bucket, rq.key, vid, err)
	}
	h := rq.w.Header()
	if res.DeleteMarker {
		h.Set("X-Amz-Delete-Marker", "true")
	}
	if res.VersionID != "" {
		h.Set("X-Amz-Version-Id", res.VersionID)
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

// parseCopySource reads x-amz-copy-source ("[/]bucket/key[?versionId=id]",
// URL-encoded) and the x-amz-copy-source-if-* conditions.
func parseCopySource(h http.Header) (store.CopySource, error) {
	raw := h.Get("X-Amz-Copy-Source")
	path, query, hasQuery := strings.Cut(raw, "?")
	var vid string
	if hasQuery {
		q, err := url.ParseQuery(query)
		if err != nil {
			return store.CopySource{}, errInvalidCopySource
		}
		if vid, err = checkVersionID(q.Get("versionId"), q.Has("versionId")); err != nil {
			return store.CopySource{}, err
		}
	}
	dec, err := url.PathUnescape(path)
	if err != nil {
		return store.CopySource{}, errInvalidCopySource
	}
	dec = strings.TrimPrefix(dec, "/")
	bucket, key, ok := strings.Cut(dec, "/")
	if !ok || bucket == "" || key == "" {
		return store.CopySource{}, errInvalidCopySource
	}
	return store.CopySource{Bucket: bucket, Key: key, Cond: parseConditions(h, "x-amz-copy-source-"), VersionID: vid}, nil
}

// setCopyVersionHeaders sets the version headers of a copy's answer:
// x-amz-version-id of the version written (CopyObject only: "" for a part)
// and x-amz-copy-source-version-id of the source version read.
func (a *api) setCopyVersionHeaders(rq *request, src store.CopySource, written, read string) error {
	if read == "" {
		read = src.VersionID
	}
	if err := a.setVersionHeaderOf(rq, src.Bucket, "x-amz-copy-source-version-id", read); err != nil {
		return err
	}
	return a.setVersionHeader(rq, written)
}

type copyObjectResult struct {
	XMLName      xml.Name `xml:"CopyObjectResult"`
	NS           string   `xml:"xmlns,attr"`
	LastModified string   `xml:"LastModified"`
	ETag         string   `xml:"ETag"`
	// ChecksumType accompanies the checksum, as in AWS's CopyObjectResult.
	ChecksumType string `xml:"ChecksumType,omitempty"`
	checksumFields
}

func (a *api) copyObject(rq *request) error {
	h := rq.r.Header
	acl, err := a.writeACL(rq)
	if err != nil {
		return err
	}
	if err := checkWriteFeatures(h); err != nil {
		return err
	}
	tags, err := copyTags(h)
	if err != nil {
		return err
	}
	src, err := parseCopySource(h)
	if err != nil {
		return err
	}
	if err := checkIfNoneMatchWrite(h); err != nil {
		return err
	}
	// Conditional writes on the destination, judged by the store with the
	// copy under the destination's lock, as for PutObject.
	opts := store.CopyOptions{IfMatch: h.Get("If-Match"), IfNoneMatch: h.Get("If-None-Match")}
	// The directive is case-sensitive, as on S3 ("copy" is unknown).
	switch h.Get("X-Amz-Metadata-Directive") {
	case "", "COPY":
	case "REPLACE":
		opts.ReplaceMeta = true
		if opts.Meta, err = parseMeta(h); err != nil {
			return err
		}
	default:
		return errInvalidMetadataDirective
	}
	if opts.ChecksumAlgorithm, err = parseChecksumAlgorithm(h); err != nil {
		return err
	}
	if opts.StorageClass, err = parseStorageClass(h); err != nil {
		return err
	}
	// A copy onto itself must change something (copying a version named by
	// its id restores it, as S3 allows); a storage class given is checked
	// against the stored one by the store.
	if src.Bucket == rq.bucket && src.Key == rq.key && src.VersionID == "" && !opts.ReplaceMeta && opts.ChecksumAlgorithm == "" && h.Get("X-Amz-Storage-Class") == "" {
		return errSelfCopy
	}
	if err := a.copyACL(rq, &src, &opts, acl, tags); err != nil {
		return err
	}
	if opts.Lock, err = a.writeLock(rq, false); err != nil {
		return err
	}
	info, err := a.st.CopyObject(rq.ctx, src, rq.bucket, rq.key, opts)
	if err != nil {
		return fmt.Errorf("copy %q/%q to %q/%q: %w", src.Bucket, src.Key, rq.bucket, rq.key, err)
	}
	setChecksumHeader(rq.w.Header(), info.Checksum)
	a.setExpiration(rq, info, info.Meta.Tags)
	if err := a.setCopyVersionHeaders(rq, src, info.VersionID, info.CopySourceVersionID); err != nil {
		return err
	}
	return writeXML(rq, copyObjectResult{
		NS: s3NS, LastModified: xmlTime(orNow(info.LastModified)), ETag: quoteETag(info.ETag),
		ChecksumType: checksumType(info.Checksum), checksumFields: checksumXML(info.Checksum),
	})
}
