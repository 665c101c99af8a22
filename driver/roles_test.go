package driver

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/feed"
)

func TestRolesLayout(t *testing.T) {
	cfg := Config{NumExecutors: 2, Cores: 2, MemoryMB: 512, GPUs: 1, Chief: true,
		PS: RoleSpec{Count: 2, Cores: 4, MemoryMB: 2048, Command: []string{"ps"}}}
	roles := cfg.Roles()
	if got := roleCounts(roles); got != "chief=1 worker=2 ps=2" {
		t.Fatalf("roles %s", got)
	}
	var got []string
	for _, s := range layout(roles) {
		got = append(got, s.id+"="+string(s.role)+string(rune('0'+s.roleRank)))
	}
	if want := "exec-0=chief0 exec-1=worker0 exec-2=worker1 exec-3=ps0 exec-4=ps1"; strings.Join(got, " ") != want {
		t.Fatalf("layout %s, want %s", strings.Join(got, " "), want)
	}
	if n := cfg.TotalGPUs(); n != 3 {
		t.Errorf("TotalGPUs %d, want 3 (chief and 2 workers with 1 each)", n)
	}
	if ps := roles[2]; ps.Role != RolePS || ps.Cores != 4 || ps.MemoryMB != 2048 || ps.GPUs != 0 {
		t.Fatalf("ps role %+v", ps)
	}
	plain := Config{NumExecutors: 3}
	if w := plain.Roles(); len(w) != 1 || w[0].Role != RoleWorker || w[0].Count != 3 {
		t.Fatalf("a job without roles: %+v", w)
	}
}

func TestValidateRoles(t *testing.T) {
	base := DefaultConfig()
	base.Command = []string{"train"}
	base.FeedMode = "direct"
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"ps with a command", func(c *Config) { c.PS.Count, c.PS.Command = 1, []string{"ps"} }, ""},
		{"built-in ps", func(c *Config) { c.PS.Count, c.PS.Builtin = 2, true }, ""},
		{"ps without cores", func(c *Config) { c.PS.Count, c.PS.Command, c.PS.Cores = 1, []string{"ps"}, 0 }, "at least 1 core"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.edit(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrConfig containing %q", err, tc.want)
			}
		})
	}
	// Parameter servers without a command of their own run Spindle's.
	c := base
	c.PS.Count, c.PS.Builtin = 1, true
	if err := c.Validate(); err != nil {
		t.Fatalf("built-in parameter servers refused: %v", err)
	}
}

func TestSplitCommand(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  string
	}{
		{"", nil, ""},
		{"python3 ps.py --port 1", []string{"python3", "ps.py", "--port", "1"}, ""},
		{`  sh -c 'echo "a b"; exit 0'  `, []string{"sh", "-c", `echo "a b"; exit 0`}, ""},
		{`a\ b "c \"d\" \x" e''f`, []string{"a b", `c "d" \x`, "ef"}, ""},
		{`x 'y`, nil, "unterminated single quote"},
		{`x "y`, nil, "unterminated double quote"},
		{`x \`, nil, "ends with a backslash"},
	}
	for _, tc := range tests {
		got, err := SplitCommand(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("SplitCommand(%q) err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SplitCommand(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// Each role's task: workers get their share of the plan, the chief and
// the parameter servers no feed; parameter servers run their own command;
// GPUs are numbered across roles in rank order.
func TestRoleTasks(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Command, cfg.Inputs, cfg.FeedMode, cfg.GPUs, cfg.Chief = []string{"train"}, []string{"in"}, "tensor", 1, true
	cfg.PS = RoleSpec{Count: 1, Cores: 1, MemoryMB: 1, GPUs: 2, Command: []string{"serve", "--port", "0"}}
	d := &Driver{cfg: cfg}
	plan := &feed.JobPlan{
		Ranks:       [][]feed.Split{{{URI: "a", Rows: 10}}, {{URI: "b", Rows: 11}}},
		RowsPerRank: []int64{10, 11},
	}
	slots := layout(cfg.Roles())
	tasks, err := d.taskBuilder(plan, 1, slots, d.cfg.Files, d.cfg.PyFiles, d.cfg.Archives)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		command, mode, splits string
		gpus                  string
	}{
		{"[train]", "", "", "[0]"},            // chief
		{"[train]", "tensor", "a", "[1]"},     // worker 0
		{"[train]", "tensor", "b", "[2]"},     // worker 1
		{"[serve --port 0]", "", "", "[3 4]"}, // ps 0
	}
	for rank, w := range want {
		task, err := tasks(rank)
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, s := range task.GetFeed().GetSplits() {
			paths = append(paths, s.GetUri())
		}
		got := fmt.Sprint(task.Command, task.GetFeed().GetMode(), strings.Join(paths, ","), task.Gpus)
		if got != fmt.Sprint(w.command, w.mode, w.splits, w.gpus) {
			t.Errorf("rank %d (%s): task %s, want %v", rank, slots[rank].role, got, w)
		}
	}
	if _, err := tasks(4); err == nil {
		t.Error("a task for rank 4 of 4")
	}
}

// TestSharedFeedMB: a fed executor's container counts the feed memory it
// shares with its training process (both count it in their resident
// sizes): twice the 64 MiB message space, and in arrow mode the lent
// space, which follows the read-ahead budget up to 64 MiB. Other roles,
// jobs without input, direct feeds and shared memory off add nothing.
func TestSharedFeedMB(t *testing.T) {
	base := Config{Inputs: []string{"data/"}, FeedMode: "arrow", MemoryBudget: 256 << 20, SharedMemory: true}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		role Role
		want int
	}{
		{"arrow", func(*Config) {}, RoleWorker, 192},
		{"arrow, small budget", func(c *Config) { c.MemoryBudget = 16 << 20 }, RoleWorker, 144},
		{"tensor", func(c *Config) { c.FeedMode = "tensor" }, RoleWorker, 128},
		{"direct", func(c *Config) { c.FeedMode = "direct" }, RoleWorker, 0},
		{"shared memory off", func(c *Config) { c.SharedMemory = false }, RoleWorker, 0},
		{"no input", func(c *Config) { c.Inputs = nil }, RoleWorker, 0},
		{"chief", func(*Config) {}, RoleChief, 0},
		{"parameter server", func(*Config) {}, RolePS, 0},
	} {
		c := base
		tc.edit(&c)
		if got := c.SharedFeedMB(tc.role); got != tc.want {
			t.Errorf("%s: %d MiB, want %d", tc.name, got, tc.want)
		}
	}
}
