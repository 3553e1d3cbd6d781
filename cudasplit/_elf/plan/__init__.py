"""Planning ELF edits: the RUNPATH policy and plan, where needed libraries resolve, and the one
planner that turns a member's facts and the output layout into an edit value."""
