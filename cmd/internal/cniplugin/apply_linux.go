package cniplugin

import (
	"errors"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/vminit/vminit/mdserver/intercept"
)

// add installs the table in a virt-launcher pod's namespace and prints
// the previous result.
func (p plugin) add(args *skel.CmdArgs) error {
	c, err := parse(args.StdinData)
	if err != nil {
		return err
	}
	if vl, err := IsVirtLauncher(args.Args); err != nil {
		return types.NewError(types.ErrInvalidEnvironmentVariables, err.Error(), "")
	} else if vl {
		for _, t := range c.tables() {
			if err := inNetNS(args.Netns, t.Install); err != nil {
				return err
			}
		}
	}
	out, err := c.result()
	if err != nil {
		return types.NewError(types.ErrInternal, "the result: "+err.Error(), "")
	}
	_, err = p.stdout.Write(out)
	return err
}

// check verifies the table a virt-launcher pod's namespace holds.
func (p plugin) check(args *skel.CmdArgs) error {
	c, err := parse(args.StdinData)
	if err != nil {
		return err
	}
	if vl, err := IsVirtLauncher(args.Args); err != nil {
		return types.NewError(types.ErrInvalidEnvironmentVariables, err.Error(), "")
	} else if !vl {
		return nil
	}
	var errs []error
	for _, t := range c.tables() {
		errs = append(errs, inNetNS(args.Netns, t.Check))
	}
	return errors.Join(errs...)
}

// del removes the table from a virt-launcher pod's namespace, if the
// namespace is still there; it reads nothing of the configuration.
func (p plugin) del(args *skel.CmdArgs) error {
	if vl, _ := IsVirtLauncher(args.Args); !vl || args.Netns == "" {
		return nil
	}
	err := inNetNS(args.Netns, intercept.Remove)
	var gone ns.NSPathNotExistErr
	if errors.As(err, &gone) {
		return nil // the namespace, and the table with it, is gone
	}
	return err
}

// inNetNS runs f on an open file of the namespace at path.
func inNetNS(path string, f func(netnsFd int) error) error {
	n, err := ns.GetNS(path)
	if err != nil {
		return err
	}
	defer n.Close()
	return f(int(n.Fd()))
}
