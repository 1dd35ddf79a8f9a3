package stack

import "errors"

// Stack is a LIFO of ints.
type Stack struct {
	items []int
}

// Push adds v on top.
func (s *Stack) Push(v int) {
	s.items = append(s.items, v)
}

// Pop removes and returns the top item.
func (s *Stack) Pop() (int, error) {
	if len(s.items) == 0 {
		return 0, errors.New("empty stack")
	}
	v := s.items[len(s.items)-1]
	s.items = s.items[:len(s.items)-1]
	return v, nil
}

func Sum(values []int) int {
	total := 0
	for _, v := range values {
		total += v
	}
	return total
}
