package config

import (
	"io"
	"io/fs"
	"slices"
	"sort"
	"testing"

	"cairn.dev/agent/contract"
)

// The agent side of the operator↔agent contract: for every command (and
// every migrate step) the agent reads exactly the variables of
// contract.Vars (plus contract.MigrateVars for migrate), and no other. The
// operators' side (libs/agentjob, the migration operator's Job test) checks
// that every variable they render is in those lists: together, every
// variable an operator renders is one the agent parses.
func TestContractVars(t *testing.T) {
	valid := map[string]string{
		contract.EnvEngine: "postgres", contract.EnvDBHost: "db.example", contract.EnvDBName: "app", contract.EnvDBUser: "u",
		contract.EnvStore: contract.StorePVC, contract.EnvPVCPath: "/backups", contract.EnvBackupJob: "shop/orders",
		contract.EnvMigration: "shop/move", contract.EnvMigrationUID: "0b9f0e2c-1111-4e5b-9c3a-2d8f2f0f0f0f",
		contract.EnvTargetHost: "target.example", contract.EnvTargetName: "app", contract.EnvTargetUser: "u",
		contract.EnvArtifact: "a.pgdump.zst",
	}
	type run struct{ command, step string }
	var runs []run
	for _, c := range contract.Commands {
		if c != contract.CommandMigrate {
			runs = append(runs, run{command: c})
			continue
		}
		for _, s := range contract.Steps {
			runs = append(runs, run{command: c, step: s})
		}
	}
	for _, r := range runs {
		t.Run(r.command+" "+r.step, func(t *testing.T) {
			read := map[string]bool{}
			env := Env{
				Lookup: func(k string) (string, bool) {
					read[k] = true
					if k == contract.EnvEngine && r.command == contract.CommandArchive {
						return "mysql", true // the archiver of a MySQL/MariaDB binary log
					}
					v, ok := valid[k]
					return v, ok
				},
				ReadFile: func(string) ([]byte, error) { return nil, fs.ErrNotExist },
			}
			var args []string
			if r.step != "" {
				args = []string{r.step}
			}
			if _, err := Load(r.command, args, env, io.Discard); err != nil {
				t.Fatalf("Load: %v", err)
			}
			want := slices.Clone(contract.Vars)
			if r.command == contract.CommandMigrate {
				want = append(want, contract.MigrateVars...)
			}
			var missing, extra []string
			for _, v := range want {
				if !read[v] {
					missing = append(missing, v)
				}
			}
			for v := range read {
				if !slices.Contains(want, v) {
					extra = append(extra, v)
				}
			}
			sort.Strings(extra)
			if len(missing) > 0 || len(extra) > 0 {
				t.Fatalf("the agent does not parse %v of the contract, and parses %v outside it", missing, extra)
			}
		})
	}
}
