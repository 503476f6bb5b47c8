package agentjob

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"cairn.dev/agent/contract"
)

// ContractProblems says what in tpl's agent container the agent would not
// understand: a command or migrate step it does not know, a variable it
// does not parse (contract.Vars, and contract.MigrateVars for migrate; the
// agent's side is tested in agent/internal/config), a variable rendered
// twice. Operators' tests call it on every Job they render; nil = none.
func ContractProblems(tpl corev1.PodTemplateSpec) []string {
	for _, c := range tpl.Spec.Containers {
		if c.Name != ContainerName {
			continue
		}
		if len(c.Args) == 0 || !slices.Contains(contract.Commands, c.Args[0]) {
			return []string{fmt.Sprintf("agent args %q: not a command of the contract %v", c.Args, contract.Commands)}
		}
		known := slices.Clone(contract.Vars)
		if c.Args[0] == contract.CommandMigrate {
			if len(c.Args) != 2 || !slices.Contains(contract.Steps, c.Args[1]) {
				return []string{fmt.Sprintf("agent args %q: not a migrate step of the contract %v", c.Args, contract.Steps)}
			}
			known = append(known, contract.MigrateVars...)
		} else if len(c.Args) != 1 {
			return []string{fmt.Sprintf("agent args %q: %s takes no argument", c.Args, c.Args[0])}
		}
		var problems []string
		seen := map[string]bool{}
		for _, e := range c.Env {
			if !slices.Contains(known, e.Name) {
				problems = append(problems, fmt.Sprintf("%q renders %s, which the agent does not parse", c.Args, e.Name))
			}
			if seen[e.Name] {
				problems = append(problems, fmt.Sprintf("%q renders %s twice", c.Args, e.Name))
			}
			seen[e.Name] = true
		}
		return problems
	}
	return []string{"no " + ContainerName + " container"}
}
