# Figure 9: reward and KL of the dcr-refit run beside the dense-reload run.
# Run by examples/fig9_rl.py in its output folder; reads fig9.csv there
# (columns: 1 step, 2 reward_dcr, 3 reward_dense, 4 kl_dcr, 5 kl_dense, ...,
# 9 receiver_failed). The dcr run is a line, the dense run points on it;
# open circles mark the steps whose receiver was killed mid-apply.
set terminal svg size 900,360
set output 'fig9.svg'
set datafile separator ','
set key top left Left reverse
set multiplot layout 1,2
set title 'reward'
set xlabel 'step'
plot 'fig9.csv' using 1:2 every ::1 with lines lw 3 title 'dcr (receiver killed every 5 steps)', \
     '' using 1:3 every ::1 with points pt 7 ps 0.5 title 'dense reload', \
     '' using 1:($9 > 0 ? $2 : 1/0) every ::1 with points pt 6 ps 1.5 lc rgb 'red' title 'receiver killed mid-apply'
set title 'KL(pi_t || pi_0)'
plot 'fig9.csv' using 1:4 every ::1 with lines lw 3 title 'dcr', \
     '' using 1:5 every ::1 with points pt 7 ps 0.5 title 'dense reload', \
     '' using 1:($9 > 0 ? $4 : 1/0) every ::1 with points pt 6 ps 1.5 lc rgb 'red' title 'receiver killed mid-apply'
unset multiplot
