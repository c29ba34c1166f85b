package agents

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const page = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="PATCH",version="v1"} 7
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="PATCH",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="status",verb="PATCH",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="GET",version="v1"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="resource.k8s.io",resource="resourceslices",scope="cluster",subresource="",verb="WATCH",version="v1"} 3
# HELP etcd_requests_total whatever
# TYPE etcd_requests_total counter
etcd_requests_total{operation="get",type="nodes"} 99
`

func TestParseRequestsSumsCodesAndSplitsSubresources(t *testing.T) {
	got, err := ParseRequests(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	want := Requests{
		{Verb: "PATCH", Resource: "nodes"}:          8,
		{Verb: "PATCH", Resource: "nodes/status"}:   5,
		{Verb: "GET", Resource: "nodes"}:            40,
		{Verb: "WATCH", Resource: "resourceslices"}: 3,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if w := got.Writes(nil); w != 13 {
		t.Errorf("writes = %v, want 13 (the PATCHes)", w)
	}
	if w := got.Writes(func(r string) bool { return r == "nodes/status" }); w != 5 {
		t.Errorf("writes of nodes/status = %v, want 5", w)
	}
}

func TestParseRequestsWithoutTheCounter(t *testing.T) {
	if _, err := ParseRequests(strings.NewReader("# TYPE x counter\nx 1\n")); err == nil {
		t.Error("a page without apiserver_request_total parsed")
	}
}

func TestSinceKeepsOnlyIncreases(t *testing.T) {
	before := Requests{{"PATCH", "nodes"}: 3, {"GET", "nodes"}: 10}
	after := Requests{{"PATCH", "nodes"}: 3, {"GET", "nodes"}: 25, {"PUT", "resourceslices"}: 2}
	want := Requests{{"GET", "nodes"}: 15, {"PUT", "resourceslices"}: 2}
	if diff := cmp.Diff(want, after.Since(before)); diff != "" {
		t.Errorf("since (-want +got):\n%s", diff)
	}
}

func TestParseStatCPU(t *testing.T) {
	tests := map[string]struct {
		stat    string
		want    float64
		wantErr bool
	}{
		// utime 1234 and stime 566 ticks: 18 s.
		"plain":              {stat: "42 (kube-apiserver) S 1 42 42 0 -1 4194560 100 0 0 0 1234 566 0 0 20 0 30 0 99 0 0", want: 18},
		"a command with ) ":  {stat: "7 (a) b) R 1 7 7 0 -1 0 0 0 0 0 100 50 0 0 20 0 1 0 5 0 0", want: 1.5},
		"truncated":          {stat: "7 (x) R 1 7", wantErr: true},
		"no command":         {stat: "7 x R", wantErr: true},
		"a field not number": {stat: "7 (x) R 1 7 7 0 -1 0 0 0 0 0 ab 50 0", wantErr: true},
	}
	for name, tc := range tests {
		got, err := parseStatCPU(tc.stat)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%s: got %v, %v; want %v (error %v)", name, got, err, tc.want, tc.wantErr)
		}
	}
}
