# Figure 9: reward and KL of the dcr-refit run beside the dense-reload run.
# Run by examples/fig9_rl.py in its output folder; reads fig9.csv there.
set terminal svg size 900,360
set output 'fig9.svg'
set datafile separator ','
set key top left
set multiplot layout 1,2
set title 'reward'
set xlabel 'step'
plot 'fig9.csv' using 1:2 every ::1 with lines lw 3 title 'dcr (receiver failure every 5 steps)', \
     '' using 1:3 every ::1 with points pt 7 ps 0.5 title 'dense reload'
set title 'KL(pi_t || pi_0)'
plot 'fig9.csv' using 1:4 every ::1 with lines lw 3 title 'dcr', \
     '' using 1:5 every ::1 with points pt 7 ps 0.5 title 'dense reload'
unset multiplot
