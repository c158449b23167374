package leasefence_test

import "github.com/leasefence/lab/leasefence"

// tok builds a token.
func tok(resource, holder string, fence leasefence.Fence) leasefence.Token {
	return leasefence.Token{Resource: resource, Holder: holder, Fence: fence}
}
