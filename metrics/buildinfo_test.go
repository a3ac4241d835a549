package metrics

import (
	"runtime"
	"testing"
)

func TestBuildInfo(t *testing.T) {
	old := Version
	Version = "v1.2.3"
	t.Cleanup(func() { Version = old })
	mfs, err := New(nil).Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "s3gate_build_info" {
			continue
		}
		if len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetGauge().GetValue() != 1 {
			t.Fatalf("s3gate_build_info: %v, want one series of value 1", mf.GetMetric())
		}
		labels := map[string]string{}
		for _, lp := range mf.GetMetric()[0].GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		for name, want := range map[string]string{"version": "v1.2.3", "goversion": runtime.Version()} {
			if labels[name] != want {
				t.Errorf("label %s = %q, want %q", name, labels[name], want)
			}
		}
		if labels["revision"] == "" {
			t.Error("label revision is empty, want a revision or unknown")
		}
		return
	}
	t.Fatal("s3gate_build_info not exported")
}
