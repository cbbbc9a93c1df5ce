#pragma once
// Ctrl-C (SIGINT) and SIGTERM while a job runs: the first asks the workers to save a checkpoint
// and stop; a second one ends the job at once. The handlers only count; the launcher's loop acts.
namespace gt {

void install_stop_signals();
int stop_signal_count();  // how many arrived since install
int last_stop_signal();   // SIGINT or SIGTERM (0: none)

}  // namespace gt
