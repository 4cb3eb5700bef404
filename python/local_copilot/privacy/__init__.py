"""What may leave the machine and what stays private: the policy on buffers' text sent to a
server, and the files only their user may read."""
