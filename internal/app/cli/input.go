package cli

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/vminit/vminit/spec"
)

// stdinName is how problems in a spec read from standard input name it.
const stdinName = "<stdin>"

// inputFlags are the flags of every command that reads a spec.
type inputFlags struct {
	sourceRoot string
}

func (f *inputFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.sourceRoot, "source-root", "", "directory files[].source.file may read from (default: the spec's own directory, or the current one for -)")
}

// spec is one spec read and decoded, with its text for the line numbers of
// problems found after loading.
type specInput struct {
	inst *spec.Instance
	name string // the file name, or stdinName
	data []byte
}

// load reads the spec at path ("-": standard input, whose source files are
// relative to the current directory), decodes, defaults and validates it.
func (f *inputFlags) load(cmd *cobra.Command, path string) (*specInput, error) {
	l := spec.Loader{SourceRoot: f.sourceRoot}
	if path != "-" {
		data, inst, err := l.LoadData(path)
		if err != nil {
			return nil, err
		}
		return &specInput{inst: inst, name: path, data: data}, nil
	}
	data, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), spec.MaxSpecSize+1))
	if err != nil {
		return nil, err
	}
	inst, err := l.Parse(data, ".")
	for _, e := range spec.AsErrors(err) {
		e.File = stdinName
	}
	if err != nil {
		return nil, err
	}
	return &specInput{inst: inst, name: stdinName, data: data}, nil
}

// locate gives problems found after loading (by a renderer or a check)
// the spec's file name and, where the field has one, its line.
func (in *specInput) locate(es spec.Errors) spec.Errors {
	var pos *spec.Positions
	for _, e := range es {
		e.File = in.name
		if e.Line == 0 && e.Field != "" {
			if pos == nil {
				_, pos, _ = spec.Decode(in.data)
			}
			if pos != nil {
				e.Line = pos.Line(e.Field)
			}
		}
	}
	return es
}

// withFile names path as the file of every field error in err.
func withFile(err error, path string) {
	for _, e := range spec.AsErrors(err) {
		e.File = path
	}
}
