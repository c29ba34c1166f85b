package webhook

import "testing"

func TestParseRole(t *testing.T) {
	tests := map[string]struct {
		in                 string
		want               Role
		serves, reconciles bool
		wantErr            bool
	}{
		"empty is all, as before the split": {in: "", want: RoleAll, serves: true, reconciles: true},
		"all":                               {in: "all", want: RoleAll, serves: true, reconciles: true},
		"webhook only serves":               {in: "webhook", want: RoleWebhook, serves: true},
		"controller only reconciles":        {in: "controller", want: RoleController, reconciles: true},
		"an unknown role":                   {in: "reconciler", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseRole(tc.in)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("ParseRole(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
			}
			if got.serves() != tc.serves || got.reconciles() != tc.reconciles {
				t.Errorf("%q serves %v reconciles %v; want %v, %v", got, got.serves(), got.reconciles(), tc.serves, tc.reconciles)
			}
		})
	}
}

func TestWebhookRoleNeverLeaderElects(t *testing.T) {
	for role, want := range map[Role]bool{RoleWebhook: false, RoleController: true, RoleAll: true} {
		o := Options{Role: role, LeaderElection: true}
		if got := o.leaderElects(); got != want {
			t.Errorf("role %s with --leader-elect: elects %v, want %v", role, got, want)
		}
	}
}
