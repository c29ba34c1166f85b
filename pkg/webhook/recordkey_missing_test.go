package webhook

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// TestAMissingRecordKeyIsReported: a replica that starts without a record
// key says so — a log line, a Warning Event (through onMissing) and a
// /readyz detail — and says so again when the key goes away; it stays
// ready, since the Secret is optional. Before, a start without the Secret
// logged nothing and /readyz did not mention the key.
func TestAMissingRecordKeyIsReported(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var lines []string
	log := funcr.New(func(prefix, args string) { mu.Lock(); lines = append(lines, args); mu.Unlock() }, funcr.Options{})
	missing := 0
	r, err := newRecordKeys(dir, time.Hour, log, func() { missing++ })
	if err != nil {
		t.Fatal(err)
	}
	p := &probes{checks: []check{recordKeyCheck(r)}}
	steps := []struct {
		name        string
		files       map[string]string
		wantMissing int
		wantLine    string
	}{
		{name: "started without the Secret", wantMissing: 1, wantLine: "[+]recordKey: NONE: the Secret gpuadmit-record-key is absent"},
		{name: "the Secret arrives", files: map[string]string{keyFileCurrent: keyA}, wantMissing: 1, wantLine: "[+]recordKey: current " + record.KeyID([]byte(keyA)) + ", previous none"},
		{name: "the Secret is deleted", files: map[string]string{keyFileCurrent: ""}, wantMissing: 2, wantLine: "[+]recordKey: NONE"},
		{name: "still deleted: no second report", wantMissing: 2, wantLine: "[+]recordKey: NONE"},
	}
	for i, s := range steps {
		if i > 0 {
			writeKeys(t, dir, s.files)
			if err := r.reload(); err != nil {
				t.Fatal(err)
			}
		}
		if missing != s.wantMissing {
			t.Errorf("%s: the missing key was reported %d times, want %d", s.name, missing, s.wantMissing)
		}
		rec := httptest.NewRecorder()
		p.ready(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), s.wantLine) {
			t.Errorf("%s: /readyz %d %q, want 200 with %q", s.name, rec.Code, rec.Body.String(), s.wantLine)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	said := 0
	for _, l := range lines {
		if strings.Contains(l, "no record key") {
			said++
		}
	}
	if said != 2 {
		t.Errorf("%d log lines say the key is missing, want 2 (at start, after the deletion): %q", said, lines)
	}
	if _, detail := recordKeyCheck(nil).run(nil); !strings.Contains(detail, "no --record-key-dir") {
		t.Errorf("without a key directory, detail %q", detail)
	}
}

// podEvents keeps Events about pods as "type reason namespace/name: note".
type podEvents struct{ got []string }

func (e *podEvents) Eventf(regarding, _ runtime.Object, typ, reason, _, note string, args ...any) {
	p := regarding.(*corev1.Pod)
	e.got = append(e.got, fmt.Sprintf("%s %s %s/%s: ", typ, reason, p.Namespace, p.Name)+fmt.Sprintf(note, args...))
}

// The Warning Event regards the replica's pod and says how to create the Secret.
func TestRecordKeyMissingEvent(t *testing.T) {
	ev := &podEvents{}
	recordKeyEvents(ev, "gpuadmit-webhook-7d9f-x", "gpuadmit-system", "/record-key")()
	recordKeyEvents(ev, "", "", "/record-key")() // a local run names no pod: no Event
	if len(ev.got) != 1 {
		t.Fatalf("Events %q, want one", ev.got)
	}
	for _, want := range []string{"Warning RecordKeyMissing gpuadmit-system/gpuadmit-webhook-7d9f-x: ", "/record-key", "not sealed",
		"kubectl -n gpuadmit-system create secret generic gpuadmit-record-key"} {
		if !strings.Contains(ev.got[0], want) {
			t.Errorf("Event %q does not say %q", ev.got[0], want)
		}
	}
}
