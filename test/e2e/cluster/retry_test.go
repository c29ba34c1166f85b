package cluster

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gpuadmit/gpuadmit/internal/listener"
)

// TestRetryPortTaken: a part whose process lost a port chosen for it is
// started again, on new ports, until it runs or three starts have failed;
// any other failure is not retried.
func TestRetryPortTaken(t *testing.T) {
	running := &runningWebhook{probe: "127.0.0.1:1"}
	taken := fmt.Errorf("%w: listen tcp 127.0.0.1:35269: bind: address already in use", listener.ErrTaken)
	tests := map[string]struct {
		fails     []error
		wantCalls int
		wantErr   error
	}{
		"taken twice, then runs":   {fails: []error{taken, taken}, wantCalls: 3},
		"taken three times: fails": {fails: []error{taken, taken, taken}, wantCalls: 3, wantErr: listener.ErrTaken},
		"another failure at once":  {fails: []error{errors.New("no kubeconfig")}, wantCalls: 1, wantErr: errors.New("no kubeconfig")},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			calls := 0
			w, err := retryPortTaken(3, func() (*runningWebhook, error) {
				calls++
				if calls <= len(tt.fails) {
					return nil, tt.fails[calls-1]
				}
				return running, nil
			})
			if calls != tt.wantCalls {
				t.Errorf("%d starts, want %d", calls, tt.wantCalls)
			}
			switch {
			case tt.wantErr == nil && (err != nil || w != running):
				t.Errorf("got %v, %v; want the running part", w, err)
			case tt.wantErr != nil && (err == nil || err.Error() != tt.wantErr.Error() && !errors.Is(err, tt.wantErr)):
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}
