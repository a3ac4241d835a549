package store

import (
	"crypto/md5" //nolint:gosec // the multipart ETag is defined with MD5.
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/s3gate/s3gate/internal/randid"
)

// CheckCompleteParts validates the part list of CompleteMultipartUpload
// against the uploaded parts (have, by number) and returns the chosen parts in
// order. An empty list wraps ErrInvalidRequest (S3 answers MalformedXML);
// numbers must be strictly ascending (ErrInvalidPartOrder); each part must
// exist with the listed ETag and, where the client listed a checksum of the
// algorithm the part stored, that checksum (ErrInvalidPart); every part but
// the last must be at least MinPartSize (ErrEntityTooSmall).
func CheckCompleteParts(req []CompletePart, have map[int]PartInfo) ([]PartInfo, error) {
	if len(req) == 0 {
		return nil, fmt.Errorf("%w: You must specify at least one part", ErrInvalidRequest)
	}
	out := make([]PartInfo, 0, len(req))
	for i, cp := range req {
		if cp.Number < 1 || cp.Number > MaxPartNumber {
			return nil, fmt.Errorf("%w: part number %d must be an integer between 1 and %d", ErrInvalidArgument, cp.Number, MaxPartNumber)
		}
		if i > 0 && cp.Number <= req[i-1].Number {
			return nil, fmt.Errorf("%w: the list of parts was not in ascending order (part %d after %d)", ErrInvalidPartOrder, cp.Number, req[i-1].Number)
		}
		p, ok := have[cp.Number]
		if !ok {
			return nil, fmt.Errorf("%w: part %d was not uploaded", ErrInvalidPart, cp.Number)
		}
		if !strings.EqualFold(trimETag(cp.ETag), trimETag(p.ETag)) {
			return nil, fmt.Errorf("%w: part %d: ETag %q does not match the uploaded part", ErrInvalidPart, cp.Number, cp.ETag)
		}
		for alg, value := range cp.Checksums {
			// Only a checksum of the algorithm the part stored can be compared;
			// the SDKs list what UploadPart answered, so that is the usual case.
			if strings.EqualFold(alg, p.Checksum.Algorithm) && value != p.Checksum.Value {
				return nil, fmt.Errorf("%w: part %d: checksum %s does not match the uploaded part", ErrInvalidPart, cp.Number, p.Checksum.Algorithm)
			}
		}
		out = append(out, p)
	}
	for _, p := range out[:len(out)-1] {
		if p.Size < MinPartSize {
			return nil, fmt.Errorf("%w: part %d is %d bytes; every part but the last must be at least %d", ErrEntityTooSmall, p.Number, p.Size, MinPartSize)
		}
	}
	return out, nil
}

// RepeatedComplete decides whether a CompleteMultipartUpload of an upload
// that no longer exists repeats the completion that wrote the current object
// (an SDK retry after a lost reply, or the loser of two concurrent
// Completes): obj must have been written by uploadID's Complete, and the
// request must list exactly the parts the object is made of (same numbers,
// same ETags, same checksums where listed). Then it returns obj as the
// answer; otherwise the upload is gone for this request: ErrNoSuchUpload.
// Engines call it under the upload's and the object's locks, with obj and
// its parts read after the locks were taken.
func RepeatedComplete(uploadID string, req []CompletePart, obj ObjectInfo) (ObjectInfo, error) {
	gone := fmt.Errorf("%w: upload %q was not found (not in progress, and not the completion of the current object)", ErrNoSuchUpload, uploadID)
	if uploadID == "" || obj.Meta.CompletedUpload != uploadID || len(req) != len(obj.Parts) {
		return ObjectInfo{}, gone
	}
	have := make(map[int]PartInfo, len(obj.Parts))
	for _, p := range obj.Parts {
		have[p.Number] = p
	}
	chosen, err := CheckCompleteParts(req, have)
	if err != nil || len(chosen) != len(obj.Parts) {
		return ObjectInfo{}, gone
	}
	return obj, nil
}

// MultipartETag is the S3 ETag of a multipart object: the hex MD5 of the
// concatenated binary MD5s of the parts, then "-N".
func MultipartETag(parts []PartInfo) string {
	h := md5.New() //nolint:gosec // see import
	var raw [md5.Size]byte
	for _, p := range parts {
		etag := trimETag(p.ETag)
		if n, err := hex.Decode(raw[:], []byte(etag)); err == nil && n == md5.Size {
			_, _ = h.Write(raw[:])
		} else {
			// Engines store the hex MD5 of every part, so this cannot happen
			// with their data; hash the text rather than fail so that the
			// result stays deterministic.
			_, _ = h.Write([]byte(etag))
		}
	}
	return hex.EncodeToString(h.Sum(nil)) + "-" + strconv.Itoa(len(parts))
}

// MultipartChecksum computes the checksum of a multipart object from its
// parts' checksums. alg "" yields an empty Checksum. ctype "" picks the S3
// default (FULL_OBJECT for CRC64NVME, COMPOSITE otherwise). COMPOSITE is the
// checksum of the concatenated raw part checksums, suffixed "-N" (not for
// CRC64NVME); FULL_OBJECT (CRC algorithms only) combines the part CRCs with
// their sizes into the CRC of the whole object, without reading the bytes.
// A part without a checksum of alg is ErrInvalidPart; a bad algorithm or type
// wraps ErrInvalidRequest.
func MultipartChecksum(alg, ctype string, parts []PartInfo) (Checksum, error) {
	alg, err := NormalizeChecksumAlgorithm(alg)
	if err != nil || alg == "" {
		return Checksum{}, err
	}
	ctype, err = normalizeChecksumType(alg, ctype)
	if err != nil {
		return Checksum{}, err
	}
	raws := make([][]byte, len(parts))
	for i, p := range parts {
		if !strings.EqualFold(p.Checksum.Algorithm, alg) {
			return Checksum{}, fmt.Errorf("%w: part %d has no %s checksum", ErrInvalidPart, p.Number, alg)
		}
		raw, err := decodeChecksum(alg, p.Checksum.Value)
		if err != nil {
			return Checksum{}, fmt.Errorf("part %d: %w", p.Number, err)
		}
		raws[i] = raw
	}

	if ctype == ChecksumComposite {
		var cat []byte
		for _, r := range raws {
			cat = append(cat, r...)
		}
		value := base64.StdEncoding.EncodeToString(checksumOf(alg, cat)) + "-" + strconv.Itoa(len(parts))
		return Checksum{Algorithm: alg, Value: value, Type: ChecksumComposite}, nil
	}

	poly, width := crcParams(alg)
	var crc uint64
	for i, r := range raws {
		v := crcFromBytes(r)
		if i == 0 {
			crc = v
			continue
		}
		crc = crcCombine(poly, width, crc, v, parts[i].Size)
	}
	value := base64.StdEncoding.EncodeToString(crcBytes(alg, crc))
	return Checksum{Algorithm: alg, Value: value, Type: ChecksumFullObject}, nil
}

// NormalizeChecksumType validates a multipart checksum type for an algorithm
// (both already known to be non-empty / valid names or ""), returning the
// effective type: S3 allows FULL_OBJECT only for CRCs and COMPOSITE for all
// but CRC64NVME. An incompatible combination wraps ErrInvalidRequest.
func NormalizeChecksumType(alg, ctype string) (string, error) {
	alg, err := NormalizeChecksumAlgorithm(alg)
	if err != nil {
		return "", err
	}
	if alg == "" {
		if ctype != "" {
			return "", ClientError(ErrInvalidRequest, "The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header.")
		}
		return "", nil
	}
	return normalizeChecksumType(alg, ctype)
}

func normalizeChecksumType(alg, ctype string) (string, error) {
	switch strings.ToUpper(strings.TrimSpace(ctype)) {
	case "":
		if alg == AlgCRC64NVME {
			return ChecksumFullObject, nil
		}
		return ChecksumComposite, nil
	case ChecksumComposite:
		if alg == AlgCRC64NVME {
			return "", ClientError(ErrInvalidRequest, "The COMPOSITE checksum type cannot be used with the crc64nvme checksum algorithm.")
		}
		return ChecksumComposite, nil
	case ChecksumFullObject:
		if !isCRC(alg) {
			return "", ClientError(ErrInvalidRequest, "The FULL_OBJECT checksum type cannot be used with the "+strings.ToLower(alg)+" checksum algorithm.")
		}
		return ChecksumFullObject, nil
	}
	return "", ClientError(ErrInvalidRequest, "Value for x-amz-checksum-type header is invalid.")
}

// crcFromBytes decodes a big-endian CRC of 4 or 8 bytes.
func crcFromBytes(b []byte) uint64 {
	if len(b) == 8 {
		return binary.BigEndian.Uint64(b)
	}
	return uint64(binary.BigEndian.Uint32(b))
}

// NewUploadID returns a fresh multipart upload id: 32 random bytes,
// base64url without padding (URL-safe, unguessable, never starting with '-').
func NewUploadID() string {
	var b [32]byte
	return randid.Base64URL(b[:])
}

// ValidUploadID reports whether id has the form NewUploadID gives: 43
// base64url characters encoding 32 bytes. Anything else names no upload.
func ValidUploadID(id string) bool {
	if len(id) != base64.RawURLEncoding.EncodedLen(32) {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(id)
	return err == nil && len(raw) == 32
}
