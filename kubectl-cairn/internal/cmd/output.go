package cmd

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// Output formats, as kubectl spells them.
const (
	OutputTable = ""
	OutputWide  = "wide"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
)

// addOutputFlag adds -o/--output with kubectl's spellings.
func addOutputFlag(c *cobra.Command, out *string) {
	c.Flags().StringVarP(out, "output", "o", "", "Output format: json, yaml or wide (default: a table)")
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{OutputJSON, OutputYAML, OutputWide}, cobra.ShellCompDirectiveNoFileComp))
}

// checkOutput refuses a format the command does not print.
func checkOutput(out string) error {
	switch out {
	case OutputTable, OutputWide, OutputJSON, OutputYAML:
		return nil
	}
	return fmt.Errorf("--output %q: use json, yaml or wide (or leave it out for a table)", out)
}

// printData writes v as JSON or YAML (out is json or yaml).
func printData(w io.Writer, out string, v any) error {
	b, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return err
	}
	if out == OutputYAML {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
