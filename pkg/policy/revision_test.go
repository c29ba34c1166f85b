package policy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRevisionOfAGitSyncCheckout builds the layout git-sync v4 leaves in its
// --root (the deploy/overlays/git-sync sidecar: --root=/git --link=current,
// the webhook reading --policies=/git/current/policies) and expects the
// synced commit as the revision, also after the link flips to a new commit.
func TestRevisionOfAGitSyncCheckout(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed; the checkout fixture needs it")
	}
	tests := map[string]struct {
		sub string // where the policies are in the repository, and what --policies names below the link
	}{
		"policies in a subdirectory (the shipped overlay)": {sub: "policies"},
		"policies at the repository's root":                {sub: ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			upstream, root := t.TempDir(), t.TempDir()
			if err := os.MkdirAll(filepath.Join(upstream, tt.sub), 0o755); err != nil {
				t.Fatal(err)
			}
			copyEmbedded(t, filepath.Join(upstream, tt.sub))
			git(t, upstream, "init", "-q")
			commit(t, upstream, "policies")
			dir := filepath.Join(root, "current", tt.sub)
			for i := range 2 {
				if i > 0 {
					appendFile(t, filepath.Join(upstream, tt.sub, "data.yaml"), "# a new commit\n")
					commit(t, upstream, "change")
				}
				head := gitSync(t, upstream, root)
				set, err := Compile(context.Background(), Directory(dir))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff("git-"+head[:12], set.Revision); diff != "" {
					t.Errorf("sync %d: revision of %s (-want +got):\n%s", i+1, dir, diff)
				}
			}
		})
	}
}

// gitSync does what one sync of git-sync v4 does (its SyncRepo): fetch the
// upstream's HEAD into a repository at root, add a detached worktree for the
// commit at root/.worktrees/<commit> whose .git file points back relatively,
// check it out, and flip the relative symlink root/current to it.
func gitSync(t *testing.T, upstream, root string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		git(t, root, "init", "-q")
	}
	git(t, root, "fetch", "-q", upstream, "HEAD")
	hash := git(t, root, "rev-parse", "FETCH_HEAD")
	git(t, root, "reset", "-q", "--soft", "FETCH_HEAD")
	wt := filepath.Join(root, ".worktrees", hash)
	git(t, root, "worktree", "add", "-q", "--force", "--detach", wt, hash, "--no-checkout")
	gitdir := "gitdir: " + filepath.Join("..", "..", ".git", "worktrees", hash) + "\n"
	if err := os.WriteFile(filepath.Join(wt, ".git"), []byte(gitdir), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, wt, "reset", "-q", "--hard", hash, "--")
	tmp := filepath.Join(root, "tmp-link")
	if err := os.Symlink(filepath.Join(".worktrees", hash), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(root, "current")); err != nil {
		t.Fatal(err)
	}
	return hash
}

func commit(t *testing.T, dir, msg string) {
	t.Helper()
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", msg)
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.email=t@example.com", "-c", "user.name=t"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}
