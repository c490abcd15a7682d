package verdict

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestErrors(t *testing.T) {
	var err error = fmt.Errorf("wrapped: %w", &Failure{Remedy: "reseat the card", Msg: "x4 of x16"})
	var f *Failure
	assert.True(t, errors.As(err, &f))
	assert.Equal(t, "wrapped: x4 of x16; remedy: reseat the card", err.Error())
	err = &Absent{Msg: "no GPU"}
	var a *Absent
	assert.True(t, errors.As(err, &a))
	assert.False(t, errors.As(err, &f))
	assert.Equal(t, "no GPU", err.Error())
}
