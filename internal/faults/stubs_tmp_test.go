package faults

import "errors"

func (a *agent) closeLoad(cmd command)  { a.fail(cmd, errors.New("todo")) }
func (a *agent) fuzz(cmd command)       { a.fail(cmd, errors.New("todo")) }
