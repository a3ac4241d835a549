package fleettest

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// The per-key register that a bucket's key is, for porcupine: its state is
// the stored value's id ("" when absent).
type (
	linOp struct {
		kind  string // put, get, delete, list
		key   string
		value string // put: the value's id
	}
	// linOut is what a get or list saw: the value's id, or "" for absent.
	// A list sees the ETag, mapped back to the id by the history's ETags.
	linOut struct{ value string }
)

var linModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(linOp).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		in := input.(linOp)
		switch in.kind {
		case "put":
			return true, in.value
		case "delete":
			return true, ""
		default: // get, list
			return output.(linOut).value == state.(string), state
		}
	},
	DescribeOperation: func(input, output any) string {
		in := input.(linOp)
		if out, ok := output.(linOut); ok {
			return fmt.Sprintf("%s(%s) -> %q", in.kind, in.key, out.value)
		}
		return fmt.Sprintf("%s(%s, %q)", in.kind, in.key, in.value)
	},
}

// linValue is the body of value id: the id, then filler derived from it, of a
// size that crosses the inline knee for some ids.
func linValue(id string, large bool) []byte {
	size := 200
	if large {
		size = inlineMax + 1000
	}
	var b bytes.Buffer
	b.WriteString(id)
	for b.Len() < size {
		b.WriteString("|" + id)
	}
	return b.Bytes()[:size]
}

// linID reads a body back to its value's id; a body that is not exactly a
// linValue yields a marker that matches no state, so the check fails.
func linID(body []byte) string {
	id, _, _ := strings.Cut(string(body), "|")
	if !bytes.Equal(body, linValue(id, len(body) > 200)) {
		return "corrupt:" + id
	}
	return id
}

// linearizable: clients send a random mix of PUT/GET/DELETE/LIST of a few
// keys to random instances; the history, with each LIST read as one
// observation per key, must be linearizable per key (porcupine). A request
// that failed is of unknown effect: a mutation then counts as pending to the
// end of the history, a read is dropped.
func linearizable(t *testing.T, f *fleet) {
	ops, clients := 240, 6
	if soak() {
		ops, clients = 4000, 12
	}
	ctx := context.Background()
	bucket := "lin"
	createBucket(t, f.insts[0].client(), bucket)
	keys := []string{"k0", "k1", "k2", "k3"}
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		etags   = map[string]string{} // ETag -> value id
		pending []int                 // history indexes of failed mutations
		failed  int
	)
	clientsOf := make([]*s3.Client, len(f.insts))
	for i, in := range f.insts {
		clientsOf[i] = in.client()
	}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			for n := range ops / clients {
				cl := clientsOf[rng.IntN(len(clientsOf))]
				key := keys[rng.IntN(len(keys))]
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				var rec []porcupine.Operation
				var mutationFailed bool
				call := now()
				switch r := rng.IntN(100); {
				case r < 35:
					id := fmt.Sprintf("c%d-%d", c, n)
					body := linValue(id, rng.IntN(3) == 0)
					out, err := cl.PutObject(rctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(body)})
					ret := now()
					mutationFailed = err != nil
					if err == nil {
						mu.Lock()
						etags[aws.ToString(out.ETag)] = id
						mu.Unlock()
					}
					sum := md5.Sum(body) // single-part ETag: known even if the answer was lost
					mu.Lock()
					etags[`"`+hex.EncodeToString(sum[:])+`"`] = id
					mu.Unlock()
					rec = append(rec, porcupine.Operation{ClientId: c, Input: linOp{"put", key, id}, Call: call, Return: ret})
				case r < 70:
					out, err := cl.GetObject(rctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
					var o linOut
					if err == nil {
						body, rerr := io.ReadAll(out.Body)
						_ = out.Body.Close()
						err = rerr
						o.value = linID(body)
					} else if isCode(err, "NoSuchKey") {
						err = nil
					}
					if err == nil {
						rec = append(rec, porcupine.Operation{ClientId: c, Input: linOp{"get", key, ""}, Call: call, Output: o, Return: now()})
					}
				case r < 85:
					_, err := cl.DeleteObject(rctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: &key})
					mutationFailed = err != nil
					rec = append(rec, porcupine.Operation{ClientId: c, Input: linOp{"delete", key, ""}, Call: call, Return: now()})
				default:
					out, err := cl.ListObjectsV2(rctx, &s3.ListObjectsV2Input{Bucket: &bucket})
					ret := now()
					if err == nil {
						seen := map[string]string{}
						for _, o := range out.Contents {
							seen[aws.ToString(o.Key)] = aws.ToString(o.ETag)
						}
						for _, k := range keys {
							// The ETag is resolved to an id after the run,
							// once every put's ETag is known.
							rec = append(rec, porcupine.Operation{ClientId: c, Input: linOp{"list", k, ""}, Call: call, Output: linOut{seen[k]}, Return: ret})
						}
					}
				}
				cancel()
				mu.Lock()
				if mutationFailed {
					failed++
					pending = append(pending, len(history))
				}
				history = append(history, rec...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	end := now()
	for _, i := range pending {
		history[i].Return = end // unknown effect: it may take place any time from its call on
	}
	for i, op := range history {
		if op.Input.(linOp).kind == "list" && op.Output.(linOut).value != "" {
			etag := op.Output.(linOut).value
			id, ok := etags[etag]
			if !ok {
				id = "unknown-etag:" + etag
			}
			history[i].Output = linOut{id}
		}
	}
	if failed > len(history)/10 {
		t.Fatalf("%d of %d requests failed", failed, len(history))
	}
	res := porcupine.CheckOperationsTimeout(linModel, history, time.Minute)
	if res != porcupine.Ok {
		t.Fatalf("history of %d operations (%d clients, 3 instances) is not linearizable per key: %v", len(history), clients, res)
	}
	t.Logf("%d operations linearizable per key (%d mutations failed, counted as pending)", len(history), failed)
}

// TestLinModel: the model refuses what a fleet must never show — a read of a
// value overwritten before the read began, a value that was never written —
// and accepts a read concurrent with the write it sees; so the check above
// can fail.
func TestLinModel(t *testing.T) {
	op := func(kind, val string, call, ret int64) porcupine.Operation {
		o := porcupine.Operation{Input: linOp{kind, "k", ""}, Call: call, Return: ret}
		if kind == "put" {
			o.Input = linOp{kind, "k", val}
		} else {
			o.Output = linOut{val}
		}
		return o
	}
	for _, tc := range []struct {
		name string
		h    []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"stale read", []porcupine.Operation{op("put", "a", 0, 1), op("put", "b", 2, 3), op("get", "a", 4, 5)}, porcupine.Illegal},
		{"read after delete", []porcupine.Operation{op("put", "a", 0, 1), op("delete", "", 2, 3), op("list", "a", 4, 5)}, porcupine.Illegal},
		{"never written", []porcupine.Operation{op("put", "a", 0, 1), op("get", "corrupt:a", 2, 3)}, porcupine.Illegal},
		{"concurrent read", []porcupine.Operation{op("put", "a", 0, 1), op("put", "b", 2, 5), op("get", "a", 3, 4), op("get", "b", 6, 7)}, porcupine.Ok},
	} {
		if got := porcupine.CheckOperationsTimeout(linModel, tc.h, 10*time.Second); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
