// Package s3api serves the S3 REST API over HTTP on top of store.ObjectStore.
// It routes path-style and virtual-host-style requests, authenticates every
// request, translates S3 headers and XML to store calls, and maps errors to S3
// error answers in one place (errors.go). It never sees SQL.
//
// Behaviour choices (AWS has several, depending on region and age):
//   - CreateBucket of a bucket we already own answers 200 when the configured
//     region is us-east-1 (AWS's legacy behaviour there) and 409
//     BucketAlreadyOwnedByYou in any other region.
//   - A missing/empty LocationConstraint creates the bucket in the configured
//     region; an explicit constraint must name that region (or "EU" for
//     eu-west-1). An explicit "us-east-1" is InvalidLocationConstraint even on
//     a us-east-1 gateway (AWS's us-east-1 takes no constraint at all), any
//     other region IllegalLocationConstraintException.
//   - XML bodies are capped at Config.MaxXMLBody, except DeleteObjects and
//     CompleteMultipartUpload, whose legitimate bodies (1000 keys of 1 KiB, 10000
//     parts with checksums) exceed 1 MiB: they are capped at max(MaxXMLBody,
//     8 MiB).
package s3api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/s3gate/s3gate/auth"
	"github.com/s3gate/s3gate/lifecycle"
	"github.com/s3gate/s3gate/store"
)

// Authenticator verifies a request's signature (auth.Verifier implements it).
type Authenticator interface {
	Verify(r *http.Request) (*auth.Result, error)
}

// Config configures the API handler.
type Config struct {
	// Region is the region this gateway answers for (default us-east-1).
	Region string
	// Domain is the base of virtual-host-style addressing (bucket.Domain);
	// empty turns virtual-host style off.
	Domain string
	// MaxXMLBody caps every parsed request body (default 1 MiB).
	MaxXMLBody int64
	// Authorizer, if set, is asked after authentication whether the key may
	// run the operation (see authz.go); nil allows every authenticated key
	// everything.
	Authorizer Authorizer
	// Identities, if set, turns on policy evaluation (access.go): each
	// request is decided by the key's identity rules, the bucket policy and
	// Block Public Access, and anonymous requests are evaluated instead of
	// refused. Authorizer is then not used.
	Identities IdentitySource
	// BlockPublicAccess is the Block Public Access of a bucket that never had
	// its own set: every flag on (true, as AWS creates buckets since 2023)
	// or none.
	BlockPublicAccess bool
	// Anonymous, if set, is told of every anonymous request answered: its
	// operation and status (0: aborted) (the anonymous request metrics).
	Anonymous func(op string, status int)
	// ReadIdleTimeout ends a request whose body makes no progress for this
	// long (400 RequestTimeout); WriteIdleTimeout cuts off a response the
	// client does not take for this long. 0 means DefaultIdleTimeout.
	ReadIdleTimeout  time.Duration
	WriteIdleTimeout time.Duration
	// ReadOnly refuses every operation but reads (readonly.go): the gateway
	// of a read replica.
	ReadOnly bool
	// LifecycleDay is the length of a lifecycle day in x-amz-expiration
	// (0: 24h), the runner's S3GATE_LIFECYCLE_DAY.
	LifecycleDay time.Duration
}

// DefaultMaxXMLBody is the default cap of parsed request bodies.
const DefaultMaxXMLBody = 1 << 20

const (
	// bigXMLBody is the cap of the two list-shaped bodies (see package doc).
	bigXMLBody = 8 << 20
	// copyBufSize is the GET copy buffer: large enough for the engines' 256 KiB
	// – 1 MiB reads, small enough to keep memory flat under concurrency.
	copyBufSize = 512 << 10
	// maxUserMeta is AWS's limit on x-amz-meta-* (keys plus values, bytes).
	maxUserMeta   = 2 << 10
	defaultRegion = "us-east-1"
)

type api struct {
	cfg   Config
	st    store.ObjectStore
	authn Authenticator
	log   *slog.Logger
	bufs  sync.Pool
	// access evaluates policies (nil: Config.Authorizer decides).
	access *access
	// lifecycles are the decoded lifecycle documents, by their text (for
	// x-amz-expiration on every GET, HEAD and PUT of a bucket with rules).
	lifecycles textCache[string, *lifecycle.Configuration]
}

// New returns the S3 API handler.
func New(cfg Config, st store.ObjectStore, authn Authenticator, log *slog.Logger) http.Handler {
	if cfg.Region == "" {
		cfg.Region = defaultRegion
	}
	if cfg.LifecycleDay <= 0 {
		cfg.LifecycleDay = 24 * time.Hour
	}
	if cfg.MaxXMLBody <= 0 {
		cfg.MaxXMLBody = DefaultMaxXMLBody
	}
	if cfg.ReadIdleTimeout <= 0 {
		cfg.ReadIdleTimeout = DefaultIdleTimeout
	}
	if cfg.WriteIdleTimeout <= 0 {
		cfg.WriteIdleTimeout = DefaultIdleTimeout
	}
	cfg.Domain = strings.ToLower(strings.Trim(cfg.Domain, "."))
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &api{cfg: cfg, st: st, authn: authn, log: log}
	if cfg.Identities != nil {
		a.access = &access{ids: cfg.Identities, blockPublic: cfg.BlockPublicAccess, st: st}
		a.access.configs, _ = st.(store.BucketConfigStore)
	}
	a.bufs.New = func() any { b := make([]byte, copyBufSize); return &b }

	// Keys may contain "//", "." and ".." and encoded slashes: no cleaning, no
	// redirects; the escaped path is split, so each key is unescaped once.
	r := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		a.serve(w, req, RouteOf(req, cfg.Domain))
	})
	return closeOnEmptyExpect(r)
}

// closeOnEmptyExpect closes the connection after answering a request that
// asked for "Expect: 100-continue" when its body was not read to the end:
//   - An empty body: net/http never sends the interim 100 for it, and
//     botocore (the aws cli) then keeps the final status line pending on the
//     pooled connection and misreads the next response on it.
//   - An early answer (a bad signature, a missing bucket) before the body:
//     without "Connection: close", net/http reads the unread body before it
//     sends the answer (to keep the connection), and the client, still
//     waiting for the 100, sends nothing: the answer only went out when the
//     client's own wait ran out (seconds). With it, the answer goes out at
//     once and the connection ends, so the client never sends the body.
//
// The request handed on is a shallow copy, so the server's own request keeps
// its body reader.
func closeOnEmptyExpect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !closeable(r) || !strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength == 0 {
			w.Header().Set("Connection", "close")
			next.ServeHTTP(w, r)
			return
		}
		body := &eofReader{ReadCloser: r.Body}
		r2 := r.WithContext(r.Context())
		r2.Body = body
		next.ServeHTTP(&closeUnlessRead{ResponseWriter: w, body: body}, r2)
	})
}

// closeable reports whether an answer may ask to close the connection. Only
// HTTP/1.x needs it, where the rest of an unread body would be parsed as the
// next request. On HTTP/2 an unread body ends with its own stream, and
// "Connection: close" would make net/http send a graceful GOAWAY that ends
// the connection's other streams too: requests whose bodies a client already
// sent on it then fail without a retry.
func closeable(r *http.Request) bool { return r.ProtoMajor == 1 }

// eofReader records whether its reader reached EOF. Its Close does not
// close the request body: closing an unread body makes net/http drain it
// (up to 256 KiB) while the answer waits, and the client, waiting for the
// 100, sends nothing. The server closes the body itself after the answer.
type eofReader struct {
	io.ReadCloser
	eof bool
}

func (e *eofReader) Close() error { return nil }

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.ReadCloser.Read(p)
	if err == io.EOF {
		e.eof = true
	}
	return n, err
}

// closeUnlessRead asks for "Connection: close" when the answer starts before
// the request body was read to its end.
type closeUnlessRead struct {
	http.ResponseWriter
	body        *eofReader
	wroteHeader bool
}

func (c *closeUnlessRead) WriteHeader(code int) {
	if !c.wroteHeader && code >= http.StatusOK {
		c.wroteHeader = true
		if !c.body.eof {
			c.ResponseWriter.Header().Set("Connection", "close")
		}
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *closeUnlessRead) Write(p []byte) (int, error) {
	if !c.wroteHeader {
		c.WriteHeader(http.StatusOK)
	}
	return c.ResponseWriter.Write(p)
}

// ReadFrom keeps the writer's sendfile path (ADR 020).
func (c *closeUnlessRead) ReadFrom(src io.Reader) (int64, error) {
	if !c.wroteHeader {
		c.WriteHeader(http.StatusOK)
	}
	if rf, ok := c.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(struct{ io.Writer }{c.ResponseWriter}, src)
}

// Unwrap lets http.ResponseController reach the real writer.
func (c *closeUnlessRead) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// vhostBucket returns the bucket of a virtual-host-style Host, or "".
func vhostBucket(host, domain string) string {
	if domain == "" {
		return ""
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(host)
	suffix := "." + domain
	if !strings.HasSuffix(host, suffix) {
		return ""
	}
	return strings.TrimSuffix(host, suffix)
}

// request is the state of one S3 request as the handlers see it.
type request struct {
	r         *http.Request
	w         *respWriter
	ctx       context.Context
	q         url.Values
	id        string
	op        string
	bucket    string
	key       string
	accessKey string
	// anonymous: the request carries no signature (policy evaluation only).
	anonymous bool
	// decision is the request-level policy decision (access.go).
	decision *decision
	// body is the verified, decoded request body (auth.Result.Body), counted.
	body *countingReader
	// idle is the raw body under its idle read deadline (nil: no body).
	idle    *idleBody
	size    int64
	trailer func() (alg, value string, err error)
	errCode string
}

type handlerFunc func(a *api, rq *request) error

// serve runs the pipeline shared by every route: request id, operation
// resolution, authentication, authorization, the handler, error answer and
// access log.
func (a *api) serve(w http.ResponseWriter, r *http.Request, rt *Route) {
	start := time.Now()
	rc := http.NewResponseController(w)
	rw := &respWriter{ResponseWriter: w, rc: rc, writeIdle: a.cfg.WriteIdleTimeout}
	// A keep-alive connection still carries the previous request's write
	// deadline; and whatever net/http writes after the handler returns (the
	// buffered end of the answer) gets a fresh one.
	rw.extend()
	defer rw.extend()
	defer rw.boundDrain(a.cfg.ReadIdleTimeout)
	rq := &request{
		r:      r,
		w:      rw,
		idle:   wrapIdleBody(r, rw, a.cfg.ReadIdleTimeout),
		ctx:    r.Context(),
		q:      rt.Query,
		id:     newRequestID(),
		bucket: rt.Bucket,
		key:    rt.Key,
		op:     rt.Op,
		body:   &countingReader{r: http.NoBody},
	}
	routeErr := rt.Err
	if routeErr != nil {
		rq.op = opUnknown
	}
	// Canonical names, set directly, with one backing array for the values.
	h, vals := w.Header(), [...]string{rq.id, newHostID(), "s3gate"}
	h["X-Amz-Request-Id"], h["X-Amz-Id-2"], h["Server"] = vals[0:1:1], vals[1:2:2], vals[2:3:3]
	defer a.accessLog(rq, start)

	if headerSectionSize(r) > maxHeaderSection {
		a.writeError(rq, withDetails(errHeaderSectionTooLarge, "MaxSizeAllowed", strconv.Itoa(maxHeaderSection)))
		return
	}
	if routeErr != nil {
		a.writeError(rq, routeErr)
		return
	}
	if rq.op == opPreflight {
		if err := a.preflight(rq); err != nil {
			a.writeError(rq, err)
		}
		return
	}
	if err := a.corsHeaders(rq); err != nil {
		a.writeError(rq, err)
		return
	}
	if rq.op == "PostObject" && rq.key == "" {
		// A browser form upload carries its signature in the form.
		if err := a.postObject(rq); err != nil {
			a.writeError(rq, err)
		}
		return
	}
	res, err := a.authn.Verify(r)
	if err != nil {
		a.writeError(rq, err)
		return
	}
	if res == nil || (res.Anonymous && a.access == nil) {
		a.writeError(rq, errAccessDenied)
		return
	}
	rq.accessKey, rq.anonymous = res.AccessKey, res.Anonymous
	if res.Body != nil {
		rq.body.r = res.Body
		defer func() {
			// Closing an unread body drains it: the answer goes out first,
			// and the drain is bounded.
			rw.boundDrain(a.cfg.ReadIdleTimeout)
			_ = res.Body.Close() // nothing to report once the answer is decided
		}()
	}
	rq.size = res.DecodedLength
	rq.trailer = res.Trailer
	if err := a.authorize(rq); err != nil {
		a.writeError(rq, err)
		return
	}
	if err := a.checkReadOnly(rq); err != nil {
		a.writeError(rq, err)
		return
	}
	if err := checkRequestShape(rq); err != nil {
		a.writeError(rq, err)
		return
	}
	if err := checkExpectedOwner(rq); err != nil {
		a.writeError(rq, err)
		return
	}
	if err := checkEncryption(rq.r.Header); err != nil {
		a.writeError(rq, err)
		return
	}

	fn, ok := handlers[rq.op]
	if !ok {
		fn = unsupported
	}
	if err := fn(a, rq); err != nil {
		a.writeError(rq, hideMissingKey(rq, err))
	}
}

// checkRequestShape refuses what no handler can take: text parameters with
// NUL or invalid UTF-8, and a PutObject or UploadPart that declares no length
// at all (no Content-Length, no chunked transfer), which S3 answers 411.
func checkRequestShape(rq *request) error {
	if err := checkTextParams(rq.q); err != nil {
		return err
	}
	if (rq.op == "PutObject" || rq.op == "UploadPart") && rq.r.Header.Get("Content-Length") == "" &&
		len(rq.r.TransferEncoding) == 0 && rq.r.ContentLength <= 0 {
		return errMissingContentLength
	}
	return nil
}

// unsupported answers operations without a handler: known S3 operations are
// NotImplemented, anything else (odd methods) MethodNotAllowed.
func unsupported(_ *api, rq *request) error {
	if rq.op == opUnknown {
		return errMethodNotAllowed
	}
	return errNotImplemented
}

// accessLog writes one line per request. It also sees handler panics: an
// aborted response is logged and the panic continues so net/http cuts the
// connection.
func (a *api) accessLog(rq *request, start time.Time) {
	rec := recover()
	status := rq.w.status
	if status == 0 {
		status = http.StatusOK
	}
	if rec != nil {
		status = 0                       // aborted mid-answer
		if rec != http.ErrAbortHandler { //nolint:errorlint // sentinel identity, as net/http compares it
			a.log.LogAttrs(rq.ctx, slog.LevelError, "s3 handler panic",
				slog.String("request_id", rq.id), slog.Any("panic", rec))
		}
	}
	a.log.LogAttrs(rq.ctx, slog.LevelInfo, "s3 request",
		slog.String("request_id", rq.id),
		slog.String("op", rq.op),
		slog.String("method", rq.r.Method),
		slog.String("bucket", rq.bucket),
		slog.String("key", rq.key),
		slog.Int("status", status),
		slog.String("error_code", rq.errCode),
		slog.Int64("bytes_in", rq.body.n),
		slog.Int64("bytes_out", rq.w.bytes),
		slog.Duration("duration", time.Since(start)),
		slog.String("access_key", rq.accessKey),
		slog.String("principal", rq.principal()),
		slog.String("remote", rq.r.RemoteAddr),
	)
	if rq.anonymous && a.cfg.Anonymous != nil {
		a.cfg.Anonymous(rq.op, status)
	}
	if rec != nil {
		panic(http.ErrAbortHandler)
	}
}

// principal names who made the request in the access log: "anonymous", the
// access key, or "" before authentication decided.
func (rq *request) principal() string {
	if rq.anonymous {
		return "anonymous"
	}
	return rq.accessKey
}

// newRequestID is 16 upper-case hex digits.
func newRequestID() string {
	var b [8]byte
	var s [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go >= 1.24)
	const digits = "0123456789ABCDEF"
	for i, c := range b {
		s[2*i], s[2*i+1] = digits[c>>4], digits[c&15]
	}
	return string(s[:])
}

// newHostID is 48 lower-case hex digits.
func newHostID() string {
	var b [24]byte
	var s [48]byte
	_, _ = rand.Read(b[:])
	hex.Encode(s[:], b[:])
	return string(s[:])
}

// respWriter records the status and counts the body bytes written. Every
// write gets the idle deadline: a client that takes nothing for writeIdle is
// cut off (the write fails and the handler aborts, releasing what it holds).
type respWriter struct {
	http.ResponseWriter
	rc        *http.ResponseController
	writeIdle time.Duration
	status    int
	bytes     int64
}

func (w *respWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.extend()
	w.ResponseWriter.WriteHeader(code)
}

// extend gives the next write to the client the full idle timeout. A request
// may run long before its first write (a large PUT), and net/http sends
// headers-only answers when the handler returns: each needs a fresh deadline.
// boundDrain readies an answer that closes the connection for the drain
// of an unread body that follows it (the handler's Close of the body, or
// net/http's after the handler: up to 256 KiB, so that the close does not
// reset the answer), which has no deadline of its own. A client that
// announced a body and never sent it got no answer (the drain ran before
// net/http flushed it) or, with Expect: 100-continue, held the connection
// and a slot of the connection cap until it went away. The answer is
// flushed first, and the drain gets the idle timeout that bounds every
// other read of a body.
func (w *respWriter) boundDrain(idle time.Duration) {
	if w.rc == nil || idle <= 0 || w.status == 0 || w.Header().Get("Connection") != "close" {
		return
	}
	_ = w.rc.Flush()                               // ErrNotSupported: flushed after the handler, as before
	_ = w.rc.SetReadDeadline(time.Now().Add(idle)) // ErrNotSupported: unbounded, as before
}

func (w *respWriter) extend() {
	if w.rc != nil {
		_ = w.rc.SetWriteDeadline(time.Now().Add(w.writeIdle)) // ErrNotSupported: unbounded, as before
	}
}

func (w *respWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	var n int
	for len(p) > 0 {
		k := min(len(p), writeSlice)
		w.extend()
		m, err := w.ResponseWriter.Write(p[:k])
		n += m
		w.bytes += int64(m)
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

// ReadFrom keeps net/http's sendfile path reachable for a stream that hands
// over a file section (an io.LimitedReader of the file, ADR 020), under
// Write's idle deadline: each ReadFrom below covers at most writeSlice bytes.
// Other sources go through Write.
func (w *respWriter) ReadFrom(src io.Reader) (int64, error) {
	rf, ok := w.ResponseWriter.(io.ReaderFrom)
	lr, limited := src.(*io.LimitedReader)
	if !ok || !limited {
		return io.Copy(struct{ io.Writer }{w}, src)
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	var n int64
	for lr.N > 0 {
		k := min(lr.N, writeSlice)
		w.extend()
		m, err := rf.ReadFrom(&io.LimitedReader{R: lr.R, N: k})
		n += m
		w.bytes += m
		lr.N -= m
		if err != nil || m < k {
			return n, err
		}
	}
	return n, nil
}

// Unwrap lets http.ResponseController reach the real writer (per-write
// deadlines, flushing).
func (w *respWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// countingReader counts the request body bytes read.
type countingReader struct {
	r   io.Reader
	n   int64
	eof bool // the body was read to its end
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err == io.EOF {
		c.eof = true
	}
	return n, err
}

// bodyLeftUnread reports a request whose body may still be (partly) on the
// wire: the connection must not carry another request, or the rest of this
// body would be read as one.
func (rq *request) bodyLeftUnread() bool {
	return !rq.body.eof && (rq.r.ContentLength > 0 || len(rq.r.TransferEncoding) > 0)
}

// maxHeaderSection is S3's limit on a request's header section: "The PUT
// request header is limited to 8 KB in size" (S3 user guide); S3 answers
// RequestHeaderSectionTooLarge beyond it on any request.
const maxHeaderSection = 8192

// headerSectionSize is the size of r's header fields as they came on the
// wire ("Name: value" and CRLF each, Host included); the request line is
// not part of the section.
func headerSectionSize(r *http.Request) int {
	n := len("Host: \r\n") + len(r.Host)
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(": \r\n") + len(v)
		}
	}
	return n
}
