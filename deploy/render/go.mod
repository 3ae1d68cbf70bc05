module hvd/deploy/render

go 1.19
