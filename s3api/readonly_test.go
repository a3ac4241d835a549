package s3api

import "testing"

func TestIsRead(t *testing.T) {
	tests := []struct {
		op   string
		read bool
	}{
		{"GetObject", true}, {"HeadObject", true}, {"HeadBucket", true}, {"ListObjectsV2", true},
		{"ListBuckets", true}, {"ListParts", true}, {"GetObjectTagging", true}, {"GetBucketLocation", true},
		{"PutObject", false}, {"DeleteObject", false}, {"DeleteObjects", false}, {"CopyObject", false},
		{"CreateBucket", false}, {"DeleteBucket", false}, {"CreateMultipartUpload", false}, {"UploadPart", false},
		{"UploadPartCopy", false}, {"CompleteMultipartUpload", false}, {"AbortMultipartUpload", false},
		{"PutObjectAcl", false}, {"PutBucketPolicy", false}, {"RestoreObject", false}, {"SelectObjectContent", false},
		{opUnknown, false},
	}
	for _, tc := range tests {
		if got := isRead(tc.op); got != tc.read {
			t.Errorf("isRead(%q) = %v, want %v", tc.op, got, tc.read)
		}
	}
}
