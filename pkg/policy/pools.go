package policy

import (
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Pools is input.pools converted once into OPA's value form. The inventory
// changes far less often than pods arrive, and converting a large inventory
// is a good part of a decision's cost, so a caller keeps one Pools per
// inventory and passes it as Input.Pools.
type Pools struct{ v ast.Value }

// PreparePools converts pools (inventory.Pool values) for evaluation.
func PreparePools(pools any) (Pools, error) {
	v, err := ast.InterfaceToValue(pools)
	if err != nil {
		return Pools{}, fmt.Errorf("convert pools: %w", err)
	}
	return Pools{v: v}, nil
}

// inputValue converts in, taking prepared pools as they are.
func inputValue(in Input) (ast.Value, error) {
	prepared, ok := in.Pools.(Pools)
	if ok {
		in.Pools = nil
	}
	v, err := ast.InterfaceToValue(in)
	if err != nil {
		return nil, fmt.Errorf("convert input: %w", err)
	}
	obj, isObj := v.(ast.Object)
	if ok && isObj && prepared.v != nil {
		obj.Insert(ast.StringTerm("pools"), ast.NewTerm(prepared.v))
	}
	return v, nil
}
