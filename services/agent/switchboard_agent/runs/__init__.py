"""One run and the lane that feeds it: the lane protocol (lease, cursor, queue
modes, aborts), the model/tool loop, the tool phase, budgets, the commit, the reply."""
