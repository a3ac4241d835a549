package s3api

import (
	"encoding/xml"
	"fmt"
	"net/http"
)

// Bucket configurations s3gate does not keep (logging, acceleration,
// Requester Pays, notifications, analytics, metrics, inventory,
// Intelligent-Tiering, website, replication, encryption) answer what AWS
// answers for a bucket with none configured, so that clients reading them
// see the state s3gate really has. Their PUTs stay NotImplemented: nothing is
// accepted and then ignored.

// emptyConfig answers a Get with doc, AWS's answer for a bucket where that
// configuration was never set, once the bucket is known to exist.
func emptyConfig(doc any) handlerFunc {
	return func(a *api, rq *request) error {
		if _, err := a.st.HeadBucket(rq.ctx, rq.bucket); err != nil {
			return fmt.Errorf("%s %q: %w", rq.op, rq.bucket, err)
		}
		return writeXML(rq, doc)
	}
}

// deleteUnconfigured answers the Delete of a configuration that is never
// set: 204, since the bucket already is as the request asks.
func deleteUnconfigured(a *api, rq *request) error {
	if _, err := a.st.HeadBucket(rq.ctx, rq.bucket); err != nil {
		return fmt.Errorf("%s %q: %w", rq.op, rq.bucket, err)
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

// emptyDoc is a configuration document with no content: <Name xmlns="..."/>.
type emptyDoc struct {
	XMLName xml.Name
	NS      string `xml:"xmlns,attr"`
}

func newEmptyDoc(name string) emptyDoc {
	return emptyDoc{XMLName: xml.Name{Local: name}, NS: s3NS}
}

// requestPayment is GetBucketRequestPayment's answer: the bucket owner pays.
type requestPayment struct {
	XMLName xml.Name `xml:"RequestPaymentConfiguration"`
	NS      string   `xml:"xmlns,attr"`
	Payer   string   `xml:"Payer"`
}

// emptyConfigList is a List*Configurations answer without configurations
// (each operation names its root differently).
type emptyConfigList struct {
	XMLName     xml.Name
	NS          string `xml:"xmlns,attr"`
	IsTruncated bool   `xml:"IsTruncated"`
}

func newEmptyConfigList(root string) emptyConfigList {
	return emptyConfigList{XMLName: xml.Name{Local: root}, NS: s3NS}
}
