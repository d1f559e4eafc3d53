# slogate in a container: the master and the workers of a distributed run
# (deploy/kubernetes/, docs/load.md "Kubernetes"). The install is the README's
# (`make setup`): a venv, pip upgraded, the package installed with the tested
# versions of constraints.txt; without the dev extra and not editable.
FROM python:3.11-slim

RUN useradd --create-home --uid 10001 slogate

WORKDIR /src
COPY . /src
RUN python -m venv /opt/slogate \
    && /opt/slogate/bin/pip install --no-cache-dir --quiet --constraint constraints.txt --upgrade pip \
    && /opt/slogate/bin/pip install --no-cache-dir --quiet --constraint constraints.txt . \
    && rm -rf /src

ENV PATH=/opt/slogate/bin:$PATH
USER slogate
WORKDIR /work
# The master's message port (slogate run --master).
EXPOSE 5557
ENTRYPOINT ["slogate"]
CMD ["--help"]
